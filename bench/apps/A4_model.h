/* A4_model.h - the model code of A4 (Active Threads §8.2), shared by every version in
 * A4_pdes.c: a conservative (Chandy-Misra-Bryant, null-message) parallel discrete-event
 * simulation of a production line.
 *
 * Model: NLP logical processes (stations). A job arriving at a station at time t is
 * handled (the "event-handling time": a calibrated busy loop of work_ns), then leaves
 * after a service time LOOKAHEAD + Exp(mean SERVICE_MEAN - LOOKAHEAD) drawn from the
 * station's own random stream, for a station drawn from the same stream: with
 * probability P_REMOTE one of the next group's stations, else one of its own group's.
 * Every station starts with one job at a random time in [0, 1). The run simulates up to
 * time t_end. (PHOLD with locality: the usual synthetic stand-in for such models.)
 *
 * Stations are split into G groups of M (M = "LPs per thread"); the groups form a ring.
 * Each group is one thread (weft or pthread) or one task per round (OpenMP). A group
 * has a heap of pending events and one input channel from the previous group. A
 * channel carries messages (events for the receiver's stations) and a promise: the
 * sender will send no message with a time below it. A group may handle an event at
 * time t only if t < the promise of its input channel (every earlier message has then
 * arrived); after each step it promises min(next own event, input promise) + LOOKAHEAD
 * to the next group (a null message when nothing else is sent). The ring advances by
 * at least LOOKAHEAD per pass, so it cannot deadlock.
 *
 * Every version handles exactly the events the serial version handles (each station's
 * random stream is consumed in time order, and times never tie in practice); the run's
 * event count and order-independent checksum are compared with the serial run's.
 *
 * The synchronization primitives come from the version (a4_sync_t), so the same code
 * runs over weft and over POSIX threads. */
#ifndef WEFT_A4_MODEL_H
#define WEFT_A4_MODEL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LOOKAHEAD 0.25
#define SERVICE_MEAN 1.0
#define P_REMOTE 0.25

typedef struct a4_event { double t; int lp; } a4_event_t;

/* Synchronization of one version: a mutex and a condition per channel. */
typedef struct a4_sync {
  void *(*mutex_new)(void);
  void *(*cond_new)(void);
  void (*lock)(void *m);
  void (*unlock)(void *m);
  void (*wait)(void *c, void *m);
  void (*signal)(void *c);
  void (*free_mutex)(void *m);
  void (*free_cond)(void *c);
} a4_sync_t;

typedef struct a4_vec { a4_event_t *v; long n, cap; } a4_vec_t;

typedef struct a4_channel {
  void *mutex, *cond;
  a4_vec_t msgs;      /* messages not yet taken by the receiver (mutex) */
  double promise;     /* no later message below it (mutex) */
  int waiting;        /* the receiver is waiting (mutex) */
} a4_channel_t;

typedef struct a4_group {
  int index, first_lp, nlp;
  a4_vec_t heap;      /* pending events of this group's stations */
  a4_vec_t out;       /* messages for the next group, sent at the end of a step */
  a4_channel_t *in, *next_in; /* own input; the next group's input */
  double sent_promise;
  int done;
  long events, waits, steps;
  uint64_t checksum;
} a4_group_t;

typedef struct a4_sim {
  int nlp, m, g;              /* stations, stations per group, groups */
  double t_end, work_units;   /* simulated time; busy-loop units per event */
  uint64_t *rng;              /* per station */
  a4_group_t *groups;
  a4_channel_t *chan;         /* chan[i]: input of group i */
  const a4_sync_t *sync;
} a4_sim_t;

static inline void a4_push(a4_vec_t *h, a4_event_t e) {
  if (h->n == h->cap) {
    h->cap = h->cap ? 2 * h->cap : 64;
    h->v = (a4_event_t *)realloc(h->v, (size_t)h->cap * sizeof *h->v);
    if (!h->v) abort();
  }
  h->v[h->n++] = e;
}

static inline int a4_less(a4_event_t a, a4_event_t b) { return a.t < b.t || (a.t == b.t && a.lp < b.lp); }

static inline void a4_heap_push(a4_vec_t *h, a4_event_t e) {
  a4_push(h, e);
  long i = h->n - 1;
  while (i > 0 && a4_less(h->v[i], h->v[(i - 1) / 2])) {
    a4_event_t t = h->v[i];
    h->v[i] = h->v[(i - 1) / 2];
    h->v[(i - 1) / 2] = t;
    i = (i - 1) / 2;
  }
}

static inline a4_event_t a4_heap_pop(a4_vec_t *h) {
  a4_event_t top = h->v[0];
  h->v[0] = h->v[--h->n];
  for (long i = 0;;) {
    long l = 2 * i + 1, r = l + 1, s = i;
    if (l < h->n && a4_less(h->v[l], h->v[s])) s = l;
    if (r < h->n && a4_less(h->v[r], h->v[s])) s = r;
    if (s == i) break;
    a4_event_t t = h->v[i];
    h->v[i] = h->v[s];
    h->v[s] = t;
    i = s;
  }
  return top;
}

static inline uint64_t a4_rand(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static inline double a4_uniform(uint64_t *s) { return (double)(a4_rand(s) >> 11) * (1.0 / 9007199254740992.0); }

/* The event-handling time: `units` of 16 dependent multiply-adds. */
static inline double a4_burn(double units) {
  volatile double sink;
  double x = 1.0;
  for (long i = 0; i < (long)units; i++)
    for (int k = 0; k < 16; k++) x = x * 1.0000001 + 1e-9;
  sink = x;
  return sink;
}

static inline uint64_t a4_event_hash(a4_event_t e) {
  uint64_t bits;
  memcpy(&bits, &e.t, sizeof bits);
  uint64_t z = bits ^ ((uint64_t)e.lp * 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  return z ^ (z >> 31);
}

/* Handles event e of station e.lp: the work, the service, the next station. Returns the
 * job's next event. */
static inline a4_event_t a4_handle(a4_sim_t *s, a4_event_t e) {
  if (s->work_units > 0) a4_burn(s->work_units);
  uint64_t *r = &s->rng[e.lp];
  double service = LOOKAHEAD - log(1.0 - a4_uniform(r)) * (SERVICE_MEAN - LOOKAHEAD);
  int g = e.lp / s->m;
  if (a4_uniform(r) < P_REMOTE) g = (g + 1) % s->g;
  int lp = g * s->m + (int)(a4_uniform(r) * s->m);
  return (a4_event_t){e.t + service, lp};
}

/* Sets up the stations, groups and channels (channels only when sync != NULL). */
static inline int a4_init(a4_sim_t *s, int nlp, int m, double t_end, double work_units,
                          const a4_sync_t *sync) {
  memset(s, 0, sizeof *s);
  if (m < 1 || nlp < m || nlp % m != 0) return -1;
  s->nlp = nlp, s->m = m, s->g = nlp / m, s->t_end = t_end, s->work_units = work_units, s->sync = sync;
  s->rng = (uint64_t *)calloc((size_t)nlp, sizeof *s->rng);
  s->groups = (a4_group_t *)calloc((size_t)s->g, sizeof *s->groups);
  s->chan = (a4_channel_t *)calloc((size_t)s->g, sizeof *s->chan);
  if (!s->rng || !s->groups || !s->chan) return -1;
  for (int i = 0; i < nlp; i++) s->rng[i] = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1) | 1;
  for (int i = 0; i < s->g; i++) {
    a4_group_t *g = &s->groups[i];
    g->index = i, g->first_lp = i * m, g->nlp = m;
    g->in = &s->chan[i];
    g->next_in = &s->chan[(i + 1) % s->g];
    if (sync) {
      s->chan[i].mutex = sync->mutex_new();
      s->chan[i].cond = sync->cond_new();
    }
    s->chan[i].promise = LOOKAHEAD; /* every event is at time >= 0 */
    for (int k = 0; k < m; k++) {
      int lp = i * m + k;
      a4_heap_push(&g->heap, (a4_event_t){a4_uniform(&s->rng[lp]), lp});
    }
  }
  return 0;
}

static inline void a4_free(a4_sim_t *s) {
  for (int i = 0; i < s->g; i++) {
    free(s->groups[i].heap.v);
    free(s->groups[i].out.v);
    free(s->chan[i].msgs.v);
    if (s->sync) {
      s->sync->free_mutex(s->chan[i].mutex);
      s->sync->free_cond(s->chan[i].cond);
    }
  }
  free(s->rng);
  free(s->groups);
  free(s->chan);
}

/* The true serial version: one heap for every station, no channels, no synchronization. */
static inline void a4_run_serial(a4_sim_t *s, long *events, uint64_t *checksum) {
  a4_vec_t h = {0, 0, 0};
  for (int i = 0; i < s->g; i++)
    for (long k = 0; k < s->groups[i].heap.n; k++) a4_heap_push(&h, s->groups[i].heap.v[k]);
  long n = 0;
  uint64_t sum = 0;
  while (h.n > 0 && h.v[0].t < s->t_end) {
    a4_event_t e = a4_heap_pop(&h);
    n++;
    sum += a4_event_hash(e);
    a4_heap_push(&h, a4_handle(s, e));
  }
  free(h.v);
  *events = n;
  *checksum = sum;
}

/* One step of group g: take the input channel's messages and promise, handle every
 * event below the promise, send the messages and the new promise to the next group;
 * then, when `block`, wait until the input channel has something new (messages or a
 * higher promise). A group publishes its promise before it waits, so the ring cannot
 * deadlock. Returns 1 once the group is done (its input promise and its next event are
 * both past t_end). */
static inline int a4_step(a4_sim_t *s, a4_group_t *g, int block) {
  const a4_sync_t *y = s->sync;
  a4_channel_t *in = g->in;
  double bound = INFINITY;
  g->steps++;
  if (s->g > 1) {
    y->lock(in->mutex);
    for (long k = 0; k < in->msgs.n; k++) a4_heap_push(&g->heap, in->msgs.v[k]);
    in->msgs.n = 0;
    bound = in->promise;
    y->unlock(in->mutex);
  }
  double limit = bound < s->t_end ? bound : s->t_end;
  while (g->heap.n > 0 && g->heap.v[0].t < limit) {
    a4_event_t e = a4_heap_pop(&g->heap);
    g->events++;
    g->checksum += a4_event_hash(e);
    a4_event_t nx = a4_handle(s, e);
    if (nx.lp / s->m == g->index) a4_heap_push(&g->heap, nx);
    else a4_push(&g->out, nx);
  }
  double next = g->heap.n ? g->heap.v[0].t : INFINITY;
  double low = next < bound ? next : bound;
  int done = bound >= s->t_end && next >= s->t_end;
  double promise = done ? INFINITY : low + LOOKAHEAD;
  if (s->g > 1 && (g->out.n > 0 || promise > g->sent_promise)) {
    a4_channel_t *o = g->next_in;
    y->lock(o->mutex);
    for (long k = 0; k < g->out.n; k++) a4_push(&o->msgs, g->out.v[k]);
    if (promise > o->promise) o->promise = promise;
    if (o->waiting) y->signal(o->cond);
    y->unlock(o->mutex);
    g->out.n = 0;
    g->sent_promise = promise;
  }
  g->done = done;
  if (done || !block || s->g == 1) return done;
  y->lock(in->mutex);
  while (in->msgs.n == 0 && in->promise <= bound) {
    in->waiting = 1;
    g->waits++;
    y->wait(in->cond, in->mutex);
    in->waiting = 0;
  }
  y->unlock(in->mutex);
  return 0;
}

#endif
