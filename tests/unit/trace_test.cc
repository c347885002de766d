// tests/unit/trace_test.cc - the tracer (weft/trace.h): a traced workload's output
// parses as JSON (a small parser here, and python3's json module when it is
// installed) and holds the expected events; a tiny buffer drops events and says so;
// the errors and the statistics dump. Skipped when built with WEFT_HOOKS=OFF.
#include "weft_test.h"

#include <weft/sched.h>
#include <weft/trace.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <cctype>
#include <sstream>
#include <string>
#include <vector>

namespace {

using weft_test::VpTest;

// ---- a minimal JSON parser (RFC 8259 values; numbers as double) ---------------------

struct Json {
  enum Kind { kNull, kBool, kNum, kStr, kArr, kObj } kind = kNull;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::vector<std::pair<std::string, Json>> obj;

  const Json *Get(const std::string &k) const {
    for (auto &kv : obj)
      if (kv.first == k) return &kv.second;
    return nullptr;
  }
  std::string Str(const std::string &k) const {
    const Json *v = Get(k);
    return v && v->kind == kStr ? v->str : std::string();
  }
  double Num(const std::string &k, double def = -1) const {
    const Json *v = Get(k);
    return v && v->kind == kNum ? v->num : def;
  }
};

class Parser {
 public:
  explicit Parser(const std::string &s) : s_(s) {}
  // Parses the whole text as one value; false (with error()) if it is not JSON.
  bool Parse(Json *out) {
    if (!Value(out, 0)) return false;
    Ws();
    return i_ == s_.size() || Fail("trailing characters");
  }
  const std::string &error() const { return err_; }

 private:
  bool Fail(const char *why) {
    if (err_.empty()) err_ = std::string(why) + " at offset " + std::to_string(i_);
    return false;
  }
  void Ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      i_++;
  }
  bool Lit(const char *w) {
    size_t n = std::char_traits<char>::length(w);
    if (s_.compare(i_, n, w) != 0) return Fail("bad literal");
    i_ += n;
    return true;
  }
  bool String(std::string *out) {
    if (s_[i_] != '"') return Fail("expected string");
    i_++;
    while (i_ < s_.size() && s_[i_] != '"') {
      unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c < 0x20) return Fail("control character in string");
      if (c == '\\') {
        if (++i_ >= s_.size()) return Fail("bad escape");
        char e = s_[i_];
        if (e == 'u') {
          for (int k = 1; k <= 4; k++)
            if (i_ + k >= s_.size() || !isxdigit(static_cast<unsigned char>(s_[i_ + k])))
              return Fail("bad \\u escape");
          i_ += 4;
          out->push_back('?');
        } else if (std::string("\"\\/bfnrt").find(e) != std::string::npos) {
          out->push_back(e);
        } else {
          return Fail("bad escape");
        }
      } else {
        out->push_back(static_cast<char>(c));
      }
      i_++;
    }
    if (i_ >= s_.size()) return Fail("unterminated string");
    i_++;
    return true;
  }
  bool Number(double *out) {
    size_t st = i_;
    if (s_[i_] == '-') i_++;
    if (i_ >= s_.size() || !isdigit(static_cast<unsigned char>(s_[i_]))) return Fail("bad number");
    if (s_[i_] == '0') i_++;
    else while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_]))) i_++;
    if (i_ < s_.size() && s_[i_] == '.') {
      i_++;
      if (i_ >= s_.size() || !isdigit(static_cast<unsigned char>(s_[i_]))) return Fail("bad fraction");
      while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_]))) i_++;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      i_++;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) i_++;
      if (i_ >= s_.size() || !isdigit(static_cast<unsigned char>(s_[i_]))) return Fail("bad exponent");
      while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_]))) i_++;
    }
    *out = std::strtod(s_.substr(st, i_ - st).c_str(), nullptr);
    return true;
  }
  bool Value(Json *v, int depth) {
    if (depth > 64) return Fail("too deep");
    Ws();
    if (i_ >= s_.size()) return Fail("unexpected end");
    char c = s_[i_];
    if (c == '{') {
      v->kind = Json::kObj;
      i_++;
      Ws();
      if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
      for (;;) {
        Ws();
        std::string k;
        if (i_ >= s_.size() || !String(&k)) return Fail("expected key");
        Ws();
        if (i_ >= s_.size() || s_[i_] != ':') return Fail("expected ':'");
        i_++;
        Json m;
        if (!Value(&m, depth + 1)) return false;
        v->obj.emplace_back(std::move(k), std::move(m));
        Ws();
        if (i_ < s_.size() && s_[i_] == ',') { i_++; continue; }
        if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
        return Fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v->kind = Json::kArr;
      i_++;
      Ws();
      if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
      for (;;) {
        Json m;
        if (!Value(&m, depth + 1)) return false;
        v->arr.push_back(std::move(m));
        Ws();
        if (i_ < s_.size() && s_[i_] == ',') { i_++; continue; }
        if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
        return Fail("expected ',' or ']'");
      }
    }
    if (c == '"') return v->kind = Json::kStr, String(&v->str);
    if (c == 't') return v->kind = Json::kBool, v->b = true, Lit("true");
    if (c == 'f') return v->kind = Json::kBool, Lit("false");
    if (c == 'n') return Lit("null");
    v->kind = Json::kNum;
    return Number(&v->num);
  }
  const std::string &s_;
  size_t i_ = 0;
  std::string err_;
};

TEST(TraceJsonParser, AcceptsAndRejects) {
  Json j;
  std::string ok = R"({"a":[1,-2.5e3,true,false,null,"x\"\u00e9"],"b":{}})";
  EXPECT_TRUE(Parser(ok).Parse(&j)) << ok;
  for (const char *bad : {"{", "[1,]", "{\"a\" 1}", "01", "1.", "\"\x01\"", "[1] x", "{'a':1}"}) {
    std::string s(bad);
    Json k;
    EXPECT_FALSE(Parser(s).Parse(&k)) << s;
  }
}

// ---- helpers --------------------------------------------------------------------------

std::string TempPath(const char *tag) {
  return ::testing::TempDir() + "weft_trace_" + tag + "_" + std::to_string(getpid()) + ".json";
}

std::string ReadFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool HavePython() { return std::system("command -v python3 >/dev/null 2>&1") == 0; }

// Validates `path` with python3's json module too, when python3 is installed.
void CheckWithPython(const std::string &path) {
  if (!HavePython()) return;  // the in-test parser has already checked it
  std::string cmd = "python3 -c 'import json,sys; json.load(open(sys.argv[1]))' '" + path + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "python3 json.load rejected " << path;
}

// Starts tracing; false (the caller skips) when built with WEFT_HOOKS=OFF.
bool Start(size_t capacity) {
  weft_trace_config_t cfg;
  weft_trace_config_init(&cfg);
  cfg.capacity = capacity;
  int rc = weft_trace_start(&cfg);
  if (rc == WEFT_EPERM) return false;
  EXPECT_EQ(rc, 0) << weft_err_name(rc);
  return true;
}

// ---- the workload ---------------------------------------------------------------------

struct Shared {
  weft_mutex_t mu;
  weft_sem_t sem;
  long counter = 0;
};

// Yields, takes the mutex around a short sleep (so others block on it), then waits
// on the semaphore (blocks until main signals).
void *Worker(void *p) {
  auto *s = static_cast<Shared *>(p);
  for (int k = 0; k < 3; k++) weft_yield();
  weft_mutex_lock(&s->mu);
  s->counter++;
  weft_sleep_ns(200 * 1000);
  weft_mutex_unlock(&s->mu);
  weft_sem_wait(&s->sem);
  return nullptr;
}

// What weft_trace_stats_print() prints.
std::string StatsText() {
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  EXPECT_NE(f, nullptr);
  if (f == nullptr) return "";
  weft_trace_stats_print(f);
  fclose(f);
  std::string out(buf, len);
  free(buf);
  return out;
}

// Runs the workload; returns the ids of the threads it created.
std::vector<uint64_t> RunWorkload(Shared *s, int nthreads) {
  EXPECT_EQ(weft_mutex_init(&s->mu), 0);
  EXPECT_EQ(weft_sem_init(&s->sem, 0), 0);
  std::vector<weft_thread_t *> ts(nthreads);
  std::vector<uint64_t> ids;
  for (auto &t : ts) {
    t = weft_test::Spawn(Worker, s);
    ids.push_back(weft_thread_id(t));
  }
  // let every worker reach the semaphore, with the VPs idle meanwhile
  EXPECT_TRUE(weft_test::SleepUntil([&] { return weft_test::Waiters(&s->sem) == nthreads; }));
  for (int i = 0; i < nthreads; i++) {
    EXPECT_EQ(weft_sem_signal(&s->sem), 0);
    weft_sleep_ns(1000 * 1000);  // each signal wakes a blocked waiter; VPs idle between
  }
  for (auto *t : ts) weft_test::Join(t);
  EXPECT_EQ(s->counter, nthreads);
  EXPECT_EQ(weft_sem_destroy(&s->sem), 0);
  EXPECT_EQ(weft_mutex_destroy(&s->mu), 0);
  return ids;
}

// Parses `path` (EXPECTs it is JSON with a traceEvents array) into *root.
void Load(const std::string &path, Json *root) {
  std::string text = ReadFile(path);
  ASSERT_FALSE(text.empty()) << path;
  Parser p(text);
  ASSERT_TRUE(p.Parse(root)) << path << ": " << p.error();
  ASSERT_EQ(root->kind, Json::kObj);
  const Json *ev = root->Get("traceEvents");
  ASSERT_TRUE(ev && ev->kind == Json::kArr);
  EXPECT_EQ(root->Str("displayTimeUnit"), "ns");
  ASSERT_TRUE(root->Get("metadata") && root->Get("metadata")->kind == Json::kObj);
  CheckWithPython(path);
}

// ---- tests ----------------------------------------------------------------------------

// Without the system monitor: a spare VP's events go to the plain OS threads' buffer,
// whose run slices are not rebuilt, so a worker the monitor moved to a spare on a
// loaded machine showed fewer slices than it ran (1 run in 25 of the suite under load).
// TraceSpareTest covers spares.
class TraceTest : public VpTest {
 protected:
  weft_test::MonitorOffEnv monitor_off_;
};

TEST_P(TraceTest, TracedRunHoldsTheExpectedEvents) {
  if (!Start(0)) GTEST_SKIP() << "built with WEFT_HOOKS=OFF";
  Shared s;
  const int n = 4;
  std::vector<uint64_t> ids = RunWorkload(&s, n);
  ASSERT_EQ(weft_trace_stop(), 0);
  EXPECT_EQ(weft_trace_dropped(), 0u);
  std::string path = TempPath("run");
  ASSERT_EQ(weft_trace_write(path.c_str()), 0);

  Json root;
  ASSERT_NO_FATAL_FAILURE(Load(path, &root));
  const auto &evs = root.Get("traceEvents")->arr;
  std::set<std::string> track_names;
  std::map<uint64_t, int> begins, ends, slices;
  std::map<int, std::vector<std::pair<double, double>>> by_track;  // X events per tid
  int idle = 0, blocked_on_sem = 0, blocked_nonnull = 0, unblocked = 0;
  const uintptr_t sem_lo = reinterpret_cast<uintptr_t>(&s.sem);
  const uintptr_t sem_hi = sem_lo + sizeof s.sem;
  for (const Json &e : evs) {
    ASSERT_EQ(e.kind, Json::kObj);
    std::string ph = e.Str("ph");
    ASSERT_FALSE(ph.empty());
    EXPECT_EQ(e.Num("pid"), 1);
    int tid = static_cast<int>(e.Num("tid"));
    EXPECT_GE(tid, 0);
    EXPECT_LE(tid, nvps());  // VPs, then the plain-OS-thread track
    if (ph == "M") {
      if (e.Str("name") == "thread_name") track_names.insert(e.Get("args")->Str("name"));
      continue;
    }
    double ts = e.Num("ts");
    EXPECT_GE(ts, 0) << "every event has a timestamp";
    const Json *args = e.Get("args");
    if (ph == "X") {
      double dur = e.Num("dur");
      EXPECT_GE(dur, 0);
      by_track[tid].emplace_back(ts, ts + dur);
      if (e.Str("name") == "idle") idle++;
      else if (args) slices[static_cast<uint64_t>(args->Num("thread"))]++;
    } else if (ph == "b") {
      begins[static_cast<uint64_t>(e.Num("id"))]++;
    } else if (ph == "e") {
      ends[static_cast<uint64_t>(e.Num("id"))]++;
    } else if (ph == "i" && e.Str("name") == "blocked") {
      ASSERT_TRUE(args);
      uintptr_t obj = std::strtoull(args->Str("obj").c_str(), nullptr, 16);
      if (obj) blocked_nonnull++;
      if (obj >= sem_lo && obj < sem_hi) blocked_on_sem++;
    } else if (ph == "i" && e.Str("name") == "unblocked") {
      unblocked++;
    }
  }
  for (int v = 0; v < nvps(); v++)
    EXPECT_TRUE(track_names.count("VP " + std::to_string(v))) << "track VP " << v;
  for (uint64_t id : ids) {
    EXPECT_EQ(begins[id], 1) << "lifetime start of thread " << id;
    EXPECT_EQ(ends[id], 1) << "lifetime end of thread " << id;
    // at least: first run, after the yields, after the mutex, after the semaphore
    EXPECT_GE(slices[id], 2) << "run slices of thread " << id;
  }
  EXPECT_GT(idle, 0) << "idle slices";
  EXPECT_GT(blocked_nonnull, 0);
  EXPECT_GE(blocked_on_sem, 1) << "a block on the semaphore, with its address";
  EXPECT_GE(unblocked, n) << "each semaphore waiter was woken";
  // the slices of one VP's track never overlap (run and idle alternate)
  for (auto &kv : by_track) {
    auto &v = kv.second;
    std::sort(v.begin(), v.end());
    for (size_t i = 1; i < v.size(); i++)
      EXPECT_GE(v[i].first + 0.0015, v[i - 1].second) << "overlap on track " << kv.first;
  }
  const Json *md = root.Get("metadata");
  EXPECT_EQ(md->Num("dropped_events"), 0);
  EXPECT_EQ(md->Num("vps"), nvps());
  weft_trace_discard();
  std::remove(path.c_str());
}

// Named threads (weft_set_name) give their run slices and lifetime spans their
// name and id; a name longer than 16 bytes survives whole; unnamed threads keep
// "thread <id>".
TEST_P(TraceTest, NamedThreadsNameTheirSlices) {
  if (!Start(0)) GTEST_SKIP() << "built with WEFT_HOOKS=OFF";
  auto body = +[](void *name) -> void * {
    if (name) weft_set_name(nullptr, static_cast<const char *>(name));
    for (int k = 0; k < 3; k++) weft_yield();
    return nullptr;
  };
  weft_thread_t *a = weft_test::Spawn(body, const_cast<char *>("tr-worker"));
  weft_thread_t *b = weft_test::Spawn(body, const_cast<char *>("a-name-of-22-bytes-xyz"));
  weft_thread_t *c = weft_test::Spawn(body, nullptr);
  uint64_t ia = weft_thread_id(a), ib = weft_thread_id(b), ic = weft_thread_id(c);
  weft_test::Join(a);
  weft_test::Join(b);
  weft_test::Join(c);
  ASSERT_EQ(weft_trace_stop(), 0);
  std::string path = TempPath("names");
  ASSERT_EQ(weft_trace_write(path.c_str()), 0);
  Json root;
  ASSERT_NO_FATAL_FAILURE(Load(path, &root));
  std::map<std::string, int> x, begin;
  for (const Json &e : root.Get("traceEvents")->arr) {
    if (e.Str("ph") == "X") x[e.Str("name")]++;
    if (e.Str("ph") == "b") begin[e.Str("name")]++;
  }
  std::string na = "tr-worker (" + std::to_string(ia) + ")";
  std::string nb = "a-name-of-22-bytes-xyz (" + std::to_string(ib) + ")";
  std::string nc = "thread " + std::to_string(ic);
  EXPECT_GE(x[na], 1) << na;
  EXPECT_EQ(begin[na], 1) << na;
  EXPECT_GE(x[nb], 1) << nb;
  EXPECT_EQ(begin[nb], 1) << nb;
  EXPECT_GE(x[nc], 1) << nc;
  weft_trace_discard();
  std::remove(path.c_str());
}

// A name that is not UTF-8 (a byte of Latin-1, a surrogate, a sequence cut short)
// still gives a file of JSON, which is UTF-8: each stray byte becomes U+FFFD, and a
// well-formed sequence passes whole (the bytes were copied as they were, and the file
// did not decode).
bool WellFormedUtf8(const std::string &s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; k++)
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    if (n == 3 && c == 0xed && static_cast<unsigned char>(s[i + 1]) > 0x9f) return false;
    i += n;
  }
  return true;
}

TEST_P(TraceTest, NamesThatAreNotUtf8StillGiveUtf8) {
  if (!Start(0)) GTEST_SKIP() << "built with WEFT_HOOKS=OFF";
  auto body = +[](void *name) -> void * {
    weft_set_name(nullptr, static_cast<const char *>(name));
    weft_yield();
    return nullptr;
  };
  const char *names[] = {"caf\xe9", "ok-\xc3\xa9", "sur\xed\xa0\x80", "cut\xf0\x9f\x98"};
  std::vector<weft_thread_t *> ts;
  for (const char *n : names) ts.push_back(weft_test::Spawn(body, const_cast<char *>(n)));
  for (weft_thread_t *t : ts) weft_test::Join(t);
  ASSERT_EQ(weft_trace_stop(), 0);
  std::string path = TempPath("utf8");
  ASSERT_EQ(weft_trace_write(path.c_str()), 0);
  std::string text = ReadFile(path);
  EXPECT_TRUE(WellFormedUtf8(text)) << "the trace file is not UTF-8";
  EXPECT_NE(text.find("caf\\ufffd ("), std::string::npos);
  EXPECT_NE(text.find("ok-\xc3\xa9 ("), std::string::npos) << "a well-formed sequence passes whole";
  EXPECT_NE(text.find("sur\\ufffd\\ufffd\\ufffd ("), std::string::npos);
  EXPECT_NE(text.find("cut\\ufffd\\ufffd\\ufffd ("), std::string::npos);
  Json root;
  ASSERT_NO_FATAL_FAILURE(Load(path, &root));
  weft_trace_discard();
  std::remove(path.c_str());
}

TEST_P(TraceTest, FullBuffersDropEventsAndSaySo) {
  if (!Start(8)) GTEST_SKIP() << "built with WEFT_HOOKS=OFF";
  Shared s;
  RunWorkload(&s, 4);
  ASSERT_EQ(weft_trace_stop(), 0);
  uint64_t dropped = weft_trace_dropped();
  EXPECT_GT(dropped, 0u);
  std::string path = TempPath("drop");
  ASSERT_EQ(weft_trace_write(path.c_str()), 0);
  Json root;
  ASSERT_NO_FATAL_FAILURE(Load(path, &root));
  const Json *md = root.Get("metadata");
  EXPECT_EQ(md->Num("dropped_events"), static_cast<double>(dropped));
  EXPECT_EQ(md->Num("capacity_per_buffer"), 8);
  const Json *per = md->Get("dropped_per_buffer");
  ASSERT_TRUE(per && per->kind == Json::kArr);
  EXPECT_EQ(per->arr.size(), static_cast<size_t>(nvps() + 1));
  EXPECT_NE(ReadFile(path).find("events dropped"), std::string::npos)
      << "a global instant event shows the loss in the timeline";
  weft_trace_discard();
  std::remove(path.c_str());
}

// A callback pushed after tracing started stays installed when tracing stops: the
// tracer takes back its own callbacks, not the top ones (it popped the C-Threads
// filters' and left its own).
std::atomic<long> g_later_entries{0};
void LaterEntry(weft_hook_event_t, weft_thread_t *, int, void *, void *) {
  g_later_entries.fetch_add(1, std::memory_order_relaxed);
}

TEST_P(TraceTest, StopKeepsCallbacksPushedAfterStart) {
  int before = weft_hook_depth(WEFT_HOOK_ENTRY);
  if (!Start(0)) GTEST_SKIP() << "built with WEFT_HOOKS=OFF";
  ASSERT_EQ(weft_hook_push(WEFT_HOOK_ENTRY, LaterEntry, nullptr), 0);
  EXPECT_EQ(weft_hook_depth(WEFT_HOOK_ENTRY), before + 2);
  ASSERT_EQ(weft_trace_stop(), 0);
  EXPECT_EQ(weft_hook_depth(WEFT_HOOK_ENTRY), before + 1);
  g_later_entries = 0;
  weft_thread_t *t;
  ASSERT_EQ(weft_create(&t, nullptr, [](void *) -> void * { return nullptr; }, nullptr), 0);
  ASSERT_EQ(weft_join(t, nullptr), 0);
  EXPECT_EQ(g_later_entries.load(), 1) << "the callback pushed after the start was taken out";
  ASSERT_EQ(weft_hook_remove(WEFT_HOOK_ENTRY, LaterEntry, nullptr), 0);
  EXPECT_EQ(weft_hook_depth(WEFT_HOOK_ENTRY), before);
  weft_trace_discard();
}

TEST_P(TraceTest, ErrorsAndStatistics) {
  if (!Start(0)) GTEST_SKIP() << "built with WEFT_HOOKS=OFF";
  EXPECT_EQ(weft_trace_is_on(), 1);
  EXPECT_EQ(weft_trace_start(nullptr), WEFT_EALREADY);
  EXPECT_EQ(weft_trace_write("/dev/null"), WEFT_EBUSY);
  Shared s;
  RunWorkload(&s, 2);
  ASSERT_EQ(weft_trace_stop(), 0);
  EXPECT_EQ(weft_trace_is_on(), 0);
  EXPECT_EQ(weft_trace_stop(), WEFT_EINVAL);
  EXPECT_EQ(weft_trace_write(nullptr), WEFT_EINVAL) << "no configured path";
  EXPECT_EQ(weft_trace_write("/nonexistent-dir/x.json"), WEFT_ESYS);

  std::string out = StatsText();
  EXPECT_NE(out.find("switches"), std::string::npos) << out;
  EXPECT_NE(out.find("idle ms"), std::string::npos) << out;
  EXPECT_NE(out.find("steals"), std::string::npos) << out;
  EXPECT_NE(out.find("sleeps"), std::string::npos) << out;
  for (int v = 0; v < nvps(); v++)
    EXPECT_NE(out.find("\n" + std::to_string(v) + " "), std::string::npos) << "row of VP " << v;
  weft_trace_discard();
  EXPECT_EQ(weft_trace_write("/dev/null"), WEFT_EINVAL) << "discarded";
}

// A capacity whose buffer size does not fit in size_t is WEFT_ENOMEM, and nothing is
// installed (it once wrapped to a tiny buffer that the first event wrote past).
TEST_P(TraceTest, CapacityTooLargeForMemoryIsEnomem) {
  weft_trace_config_t cfg;
  weft_trace_config_init(&cfg);
  cfg.capacity = (SIZE_MAX >> 5) + 2;  // times 32 bytes wraps around
  int rc = weft_trace_start(&cfg);
  if (rc == WEFT_EPERM) GTEST_SKIP() << "built with WEFT_HOOKS=OFF";
  EXPECT_EQ(rc, WEFT_ENOMEM);
  EXPECT_EQ(weft_trace_is_on(), 0);
  Shared s;
  RunWorkload(&s, 2);  // events with nothing installed
  EXPECT_EQ(weft_trace_stop(), WEFT_EINVAL);
}

TEST_P(TraceTest, EnvironmentVariableStartsTracing) {
  std::string path = TempPath("env");
  unsetenv("WEFT_TRACE");
  EXPECT_EQ(weft_trace_from_env(), 0);
  setenv("WEFT_TRACE", path.c_str(), 1);
  int rc = weft_trace_from_env();
  unsetenv("WEFT_TRACE");
  if (rc == WEFT_EPERM) GTEST_SKIP() << "built with WEFT_HOOKS=OFF";
  ASSERT_EQ(rc, 1);
  Shared s;
  RunWorkload(&s, 2);
  // the atexit handler would do this at exit; here the test does it itself
  ASSERT_EQ(weft_trace_stop(), 0);
  ASSERT_EQ(weft_trace_write(nullptr), 0);
  Json root;
  ASSERT_NO_FATAL_FAILURE(Load(path, &root));
  weft_trace_discard();
  std::remove(path.c_str());
}

// Steals are recorded: which VP took how many threads from which, in the JSON (an
// instant "steal" on the thief's track) and in the per-VP statistics. A steal noted
// by a scheduler (weft_sched_steal_note) at 2 and 4 VPs; a kernel steal
// (weft_sched_steal_half from a busy VP's dispatch queue) at 2 VPs, where no third VP
// can take the thread first. At 1 VP there is nobody to steal from: nothing recorded.
std::atomic<int> g_spin_vp{-1};
std::atomic<int> g_spin_release{0};

void *Spinner(void *) {
  g_spin_vp = weft_vp_self();
  weft_test::SpinUntil([] { return g_spin_release.load() == 1; });
  return nullptr;
}

TEST_P(TraceTest, StealsAreRecordedPerVp) {
  if (!Start(0)) GTEST_SKIP() << "built with WEFT_HOOKS=OFF";
  weft_debug_stats_t before;
  weft_debug_stats(&before);
  int me = weft_vp_self();
  int victim = (me + 1) % nvps();
  weft_sched_steal_note(weft_sched_vp(victim), 3, weft_self());  // ignored at 1 VP
  weft_sched_steal_note(weft_sched_vp(victim), 0, weft_self());  // n <= 0: ignored
  weft_sched_steal_note(nullptr, 2, weft_self());                // no victim: ignored
  int kernel_steals = 0, spin_vp = -1;
  if (nvps() == 2) {
    g_spin_vp = -1;
    g_spin_release = 0;
    weft_attr_t attr;
    weft_attr_init(&attr);
    attr.vproc = WEFT_VPROC(victim);
    weft_thread_t *spinner = weft_test::Spawn(Spinner, nullptr, &attr);
    ASSERT_TRUE(weft_test::SpinUntil([] { return g_spin_vp.load() >= 0; }));
    spin_vp = g_spin_vp.load();
    ASSERT_NE(spin_vp, me) << "main never switched: the spinner runs on the other VP";
    weft_thread_t *x = weft_test::Spawn(+[](void *) { return weft_test::P(5); }, nullptr, &attr);
    weft_thread_t *got = weft_sched_steal_half(weft_sched_vp(spin_vp), weft_sched_vp(me));
    EXPECT_EQ(got, x) << "the busy VP's only queued thread";
    if (got == x) {
      kernel_steals = 1;
      weft_sched_enqueue(weft_sched_vp(me), x);
    }
    EXPECT_EQ(weft_test::Join(x), weft_test::P(5));
    g_spin_release = 1;
    weft_test::Join(spinner);
  }
  ASSERT_EQ(weft_trace_stop(), 0);
  weft_debug_stats_t after;
  weft_debug_stats(&after);
  int noted = nvps() > 1 ? 1 : 0;
  EXPECT_GE(after.steals - before.steals, static_cast<uint64_t>(noted + kernel_steals));

  std::string path = TempPath("steal");
  ASSERT_EQ(weft_trace_write(path.c_str()), 0);
  Json root;
  ASSERT_NO_FATAL_FAILURE(Load(path, &root));
  int note_seen = 0, kernel_seen = 0, steals_on_me = 0;
  for (const Json &e : root.Get("traceEvents")->arr) {
    if (e.Str("ph") != "i" || e.Str("name") != "steal") continue;
    EXPECT_EQ(e.Str("cat"), "weft.steal");
    const Json *args = e.Get("args");
    ASSERT_TRUE(args);
    int tid = static_cast<int>(e.Num("tid"));
    int v = static_cast<int>(args->Num("victim"));
    int count = static_cast<int>(args->Num("count"));
    EXPECT_NE(v, tid) << "a VP never steals from itself";
    EXPECT_GE(count, 1);
    if (tid != me) continue;
    steals_on_me++;
    if (v == victim && count == 3 &&
        static_cast<uint64_t>(args->Num("thread")) == weft_thread_id(weft_self()))
      note_seen++;
    if (v == spin_vp && count == 1) kernel_seen++;
  }
  EXPECT_EQ(note_seen, noted);
  EXPECT_GE(kernel_seen, kernel_steals);
  if (nvps() == 1) {
    EXPECT_EQ(steals_on_me, 0);
  }

  std::string out = StatsText();
  EXPECT_NE(out.find("stolen"), std::string::npos) << out;
  // the row of our VP: switches blocks idles idle-ms steals stolen events dropped
  std::istringstream rows(out);
  std::string line;
  bool found = false;
  while (std::getline(rows, line)) {
    std::istringstream cols(line);
    std::string name;
    uint64_t sw, bl, id, st, sn;
    double ms;
    if (!(cols >> name) || name != std::to_string(me)) continue;
    ASSERT_TRUE(cols >> sw >> bl >> id >> ms >> st >> sn) << line;
    EXPECT_EQ(st, static_cast<uint64_t>(steals_on_me)) << line;
    EXPECT_GE(sn, static_cast<uint64_t>(3 * noted + kernel_steals)) << line;
    found = true;
  }
  EXPECT_TRUE(found) << out;
  weft_trace_discard();
  std::remove(path.c_str());
}

// weft_trace_stats_print's events column: "-" while the recording runs (only its VP
// may read that count then; the table said 0), the counts once it has stopped.
TEST_P(TraceTest, StatsShowTheEventsOnceStopped) {
  if (!Start(0)) GTEST_SKIP() << "built with WEFT_HOOKS=OFF";
  for (int i = 0; i < 20; i++)
    weft_test::Join(weft_test::Spawn(+[](void *) -> void * { return nullptr; }, nullptr));
  // the events column of every VP row (and the OS row): the 8th field
  auto events = [](const std::string &out) {
    std::vector<std::string> v;
    std::istringstream rows(out);
    std::string line;
    while (std::getline(rows, line)) {
      std::istringstream cols(line);
      std::string f[9];
      int n = 0;
      while (n < 9 && cols >> f[n]) n++;
      if (n == 9 && (f[0] == "OS" || std::isdigit(static_cast<unsigned char>(f[0][0]))))
        v.push_back(f[7]);
    }
    return v;
  };
  std::string out = StatsText();
  auto on = events(out);
  ASSERT_EQ(on.size(), static_cast<size_t>(nvps() + 1)) << out;
  for (auto &e : on) EXPECT_EQ(e, "-") << out;
  ASSERT_EQ(weft_trace_stop(), 0);
  out = StatsText();
  auto off = events(out);
  ASSERT_EQ(off.size(), static_cast<size_t>(nvps() + 1)) << out;
  unsigned long long sum = 0;
  for (auto &e : off) {
    EXPECT_TRUE(!e.empty() && std::isdigit(static_cast<unsigned char>(e[0]))) << out;
    sum += std::strtoull(e.c_str(), nullptr, 10);
  }
  EXPECT_GT(sum, 0u) << out;  // 20 threads' lifetimes and switches were recorded
  weft_trace_discard();
}

WEFT_INSTANTIATE_VPS(TraceTest);

// A thread that runs on a spare VP of the system monitor (the only VP's kernel
// thread blocks in a plain read(2)) keeps its lifetime span: its events go to the
// shared buffer (a spare's index is past the VPs'), whose starts and ends were
// dropped when the trace was written.
class TraceSpareTest : public weft_test::WeftTest {};

void *PlainRead(void *p) {
  char c = 0;
  return weft_test::P(read(*static_cast<int *>(p), &c, 1));
}

TEST_F(TraceSpareTest, ThreadOnASpareKeepsItsLifetime) {
  unsetenv("WEFT_MONITOR");
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  ASSERT_EQ(weft_init(&cfg), 0);
  if (!Start(0)) GTEST_SKIP() << "built with WEFT_HOOKS=OFF";
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  weft_thread_t *r = weft_test::Spawn(PlainRead, &fds[0]);
  weft_yield();  // the reader blocks the only VP; this thread goes on on a spare
  weft_thread_t *w = weft_test::Spawn(+[](void *p) -> void * {
    char c = 'x';
    return weft_test::P(write(*static_cast<int *>(p), &c, 1));
  }, &fds[1]);
  uint64_t wid = weft_thread_id(w);
  EXPECT_EQ(weft_test::Join(w), weft_test::P(1));
  EXPECT_EQ(weft_test::Join(r), weft_test::P(1));
  ASSERT_EQ(weft_trace_stop(), 0);
  std::string path = TempPath("spare");
  ASSERT_EQ(weft_trace_write(path.c_str()), 0);
  Json root;
  ASSERT_NO_FATAL_FAILURE(Load(path, &root));
  int b = 0, e = 0;
  for (const Json &ev : root.Get("traceEvents")->arr) {
    std::string ph = ev.Str("ph");
    if ((ph == "b" || ph == "e") && static_cast<uint64_t>(ev.Num("id")) == wid) (ph == "b" ? b : e)++;
  }
  EXPECT_EQ(b, 1) << "lifetime start of the writer";
  EXPECT_EQ(e, 1) << "lifetime end of the writer";
  close(fds[0]);
  close(fds[1]);
  std::remove(path.c_str());
}

TEST(TraceApi, StartNeedsARunningRuntime) {
  int rc = weft_trace_start(nullptr);
  EXPECT_TRUE(rc == WEFT_ENOTINIT || rc == WEFT_EPERM) << weft_err_name(rc);
  EXPECT_EQ(weft_trace_is_on(), 0);
  EXPECT_EQ(weft_trace_stop(), WEFT_EINVAL);
}

}  // namespace
