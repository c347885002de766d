// weft/cpp/monitor.hpp - Hoare monitors, as Presto had them (Presto §2).
//
// A monitor admits one thread at a time. Its conditions have Hoare semantics: signal()
// hands the monitor straight to the waiter it wakes, which runs at once with the
// state exactly as the signaller left it (no re-check of the predicate needed), and
// the signaller waits ("urgent" queue) until that thread leaves the monitor or waits
// again; it then resumes before any newly arriving thread. Built with Hoare's own
// construction over weft semaphores, which hand a unit straight to the longest waiter.
//
//   class account : weft::monitor {
//     long balance_ = 0;
//     condition funds_{*this};
//    public:
//     void deposit(long n) { entry e(*this); balance_ += n; funds_.signal(); }
//     void withdraw(long n) { entry e(*this); while (balance_ < n) funds_.wait(); balance_ -= n; }
//   };
//
// (`while` rather than `if` only because one deposit may not cover the withdrawal.)
#ifndef WEFT_CPP_MONITOR_HPP
#define WEFT_CPP_MONITOR_HPP

#include "weft/cpp/error.hpp"
#include "weft/sem.h"

namespace weft {

class monitor {
 public:
  monitor() noexcept = default;
  monitor(const monitor &) = delete;
  monitor &operator=(const monitor &) = delete;

  // enter() waits for the monitor (may switch); leave() passes it to a signaller
  // waiting on the urgent queue first, else to the next entering thread.
  void enter() { detail::check(weft_sem_wait(&mutex_), "weft::monitor::enter"); }
  void leave() noexcept {
    if (urgent_count_ > 0) weft_sem_signal(&urgent_);
    else weft_sem_signal(&mutex_);
  }

  // RAII entry: enter() in the constructor, leave() in the destructor.
  class entry {
   public:
    explicit entry(monitor &m) : m_(m) { m_.enter(); }
    ~entry() { m_.leave(); }
    entry(const entry &) = delete;
    entry &operator=(const entry &) = delete;

   private:
    monitor &m_;
  };

  // A condition of the monitor; use only inside it.
  class condition {
   public:
    explicit condition(monitor &m) noexcept : m_(m) {}
    condition(const condition &) = delete;
    condition &operator=(const condition &) = delete;
    // wait() leaves the monitor and blocks until signal(); returns inside the
    // monitor, handed over by the signaller. May switch.
    void wait() {
      count_++;
      m_.leave();
      detail::check(weft_sem_wait(&sem_), "weft::monitor::condition::wait");
      count_--;
    }
    // signal() wakes the longest waiter, if any, hands it the monitor and waits on the
    // urgent queue until it leaves or waits. No waiter: nothing happens. May switch.
    void signal() {
      if (count_ == 0) return;
      m_.urgent_count_++;
      weft_sem_signal(&sem_);
      detail::check(weft_sem_wait(&m_.urgent_), "weft::monitor::condition::signal");
      m_.urgent_count_--;
    }
    // queue() tells whether any thread waits (Hoare's "condname.queue").
    bool queue() const noexcept { return count_ > 0; }

   private:
    monitor &m_;
    weft_sem_t sem_{};  // waiters block here (count 0)
    long count_ = 0;    // waiters; read and written only inside the monitor
  };

 private:
  weft_sem_t mutex_ = WEFT_SEM_INIT(1);  // entry: one unit = the monitor is free
  weft_sem_t urgent_{};                  // signallers wait here (count 0)
  long urgent_count_ = 0;                // inside the monitor only
};

}  // namespace weft

#endif
