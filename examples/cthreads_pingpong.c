/* examples/cthreads_pingpong.c - C-Threads §5.1's PingPong, written in C-Threads.
 *
 * Two C-Threads hand a turn back and forth through one condition variable. Like the
 * paper, it runs in one of three set-ups:
 *
 *   cthreads_pingpong 1        one kernel thread: every hand-off is a user-level switch
 *   cthreads_pingpong 2        two kernel threads
 *   cthreads_pingpong wired    both threads wired: each on a kernel thread of its own,
 *                              so every hand-off goes through the kernel (futex)
 *
 * and prints the time of one hand-off. There is no weft call in it: the C-Threads
 * layer starts weft on the first call and stops it at exit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weft/cthreads.h>

static struct mutex lock = MUTEX_INITIALIZER;
static struct condition turn_changed = CONDITION_INITIALIZER;
static long turn;          /* whose turn: even = ping, odd = pong (under lock) */
static long rounds = 100000;
static int wired;

static void *player(void *arg) {
  long me = (long)arg;
  if (wired) cthread_wire();
  for (long i = 0; i < rounds; i++) {
    mutex_lock(&lock);
    while (turn % 2 != me) condition_wait(&turn_changed, &lock);
    turn++;
    condition_signal(&turn_changed);
    mutex_unlock(&lock);
  }
  if (wired) cthread_unwire();
  return NULL;
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "1";
  if (argc > 2) rounds = atol(argv[2]);
  if (strcmp(mode, "wired") == 0) {
    wired = 1;
  } else {
    cthread_set_kernel_limit(atoi(mode) > 0 ? atoi(mode) : 1);
  }
  double t0 = now_us();
  cthread_t ping = cthread_fork(player, (void *)0L);
  cthread_t pong = cthread_fork(player, (void *)1L);
  cthread_set_name(ping, "ping");
  cthread_set_name(pong, "pong");
  cthread_join(ping);
  cthread_join(pong);
  double us = now_us() - t0;
  printf("PingPong (%s): %ld hand-offs, %.3f us each, %d kernel threads for C-Threads%s\n",
         mode, 2 * rounds, us / (2.0 * rounds), cthread_kernel_limit(),
         wired ? " + 2 wired" : "");
  return turn == 2 * rounds ? 0 : 1;
}
