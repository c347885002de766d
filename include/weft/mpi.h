/* weft/mpi.h - MPI from weft threads (the optional libweft_mpi, docs/mpi.md).
 *
 * A weft thread that waits for an MPI request through these calls parks (blocks as a
 * weft thread) instead of spinning in MPI's progress engine on its VP: the other
 * weft threads of the VP keep running. A poller tests the outstanding requests
 * (MPI_Testsome over the set) and makes each parked thread ready exactly once, when
 * its requests have completed:
 *   - on idle VPs, through a do-when-idle function (weft/vp.h), registered only while
 *     requests are outstanding;
 *   - on busy VPs, from a poller weft thread that tests every poll_interval_ns (a
 *     weft timer) while requests are outstanding, and finishes when none have been
 *     for 10 intervals (weft_mpi_finalize ends it at once);
 *   - in the park path: a thread first tests its own requests (for up to spin_ns,
 *     yielding between tests), and before it parks the whole set if the last test
 *     is older than poll_interval_ns.
 * With no request outstanding none of this runs.
 *
 * From a plain OS thread (or with weft not running) every call is the blocking MPI
 * call. All calls return MPI error codes (MPI_SUCCESS on success). Errors of weft's
 * own: MPI_ERR_OTHER (weft_mpi_init has not succeeded, or weft_mpi_finalize has run),
 * MPI_ERR_ARG (bad argument), MPI_ERR_NO_MEM, MPI_ERR_PENDING (finalize with parked
 * requests).
 *
 * Thread levels: weft_mpi_init asks MPI for cfg.thread_level (default
 * MPI_THREAD_MULTIPLE). If MPI provides less, weft serialises its own MPI calls with
 * one lock (weft_mpi_lock/unlock below); a program that also calls MPI directly from
 * several weft threads must then bracket those calls with weft_mpi_lock/unlock.
 * MPI_THREAD_FUNNELED and MPI_THREAD_SINGLE are treated as SERIALIZED (weft threads
 * move between kernel threads, so "only the main thread" cannot be kept).
 *
 * Collectives: MPI requires that the collectives on one communicator are started in
 * the same order on every rank. Weft threads run in no fixed order, so two threads
 * must not start collectives on the same communicator concurrently: give each
 * thread its own communicator (MPI_Comm_dup, done in the same order on every rank
 * before the threads start), or issue each collective from one thread only.
 */
#ifndef WEFT_MPI_H
#define WEFT_MPI_H

#include <mpi.h>
#include <stdint.h>

#include "weft/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Configuration of weft_mpi_init_config(); fill it with weft_mpi_config_init(). */
typedef struct weft_mpi_config {
  int thread_level;          /* level asked of MPI_Init_thread; default
                                MPI_THREAD_MULTIPLE. Below it weft serialises. */
  uint64_t poll_interval_ns; /* the busy-VP bound: while requests are outstanding the
                                poller thread tests them at least this often (when
                                its VP switches threads); also gates the park-path
                                test of the whole set. Default 100000 (100 us);
                                must be > 0. */
  int idle_poll;             /* nonzero (default): idle VPs make the poller test the
                                requests (a do-when-idle function); 0: only the
                                poller thread's interval and the park path do. */
  uint64_t spin_ns;          /* the first phase of a wait: a weft thread tests its own
                                requests, yielding between tests, for up to this long
                                before it parks (the ping-pong latency of a quiet VP);
                                0: test once. Default 20000 (20 us). */
} weft_mpi_config_t;

/* weft_mpi_config_init() fills cfg with the defaults. */
WEFT_API void weft_mpi_config_init(weft_mpi_config_t *cfg);

/* weft_mpi_init_config() calls MPI_Init_thread(argc, argv, cfg->thread_level, ...)
 * (cfg NULL: defaults) and sets *provided (may be NULL) to the level MPI provides;
 * below MPI_THREAD_MULTIPLE weft serialises its own MPI calls. Call it once, from the
 * main thread, before or after weft_init(). Errors: MPI_ERR_ARG (bad cfg: level not
 * one of MPI's four, interval 0); MPI_ERR_OTHER (MPI or weft_mpi already initialized,
 * or already finalized); MPI_Init_thread's own error. */
WEFT_API int weft_mpi_init_config(int *argc, char ***argv, const weft_mpi_config_t *cfg,
                                  int *provided);

/* weft_mpi_init() is weft_mpi_init_config() with the defaults (asks for
 * MPI_THREAD_MULTIPLE). */
WEFT_API int weft_mpi_init(int *argc, char ***argv, int *provided);

/* weft_mpi_finalize() calls MPI_Finalize. With requests outstanding (threads parked
 * in weft_mpi_wait*, or about to park), or with any other thread inside a weft_mpi
 * call (testing its requests before it parks, or in the blocking call of a plain OS
 * thread), it does nothing and returns MPI_ERR_PENDING:
 * complete (or MPI_Cancel) them and call again. Call it from the main thread (as
 * MPI requires) after the threads that use MPI are done; before or after
 * weft_shutdown(). Errors: MPI_ERR_PENDING; MPI_ERR_OTHER (not initialized);
 * MPI_Finalize's own error. */
WEFT_API int weft_mpi_finalize(void);

/* weft_mpi_wait() waits for *req as MPI_Wait does (sets *req to MPI_REQUEST_NULL
 * unless persistent; status may be MPI_STATUS_IGNORE). A weft thread parks. A
 * persistent request must have been started. Errors: MPI_ERR_ARG (req NULL), those
 * above, and the request's own. */
WEFT_API int weft_mpi_wait(MPI_Request *req, MPI_Status *status);

/* weft_mpi_waitall() waits for all n requests as MPI_Waitall does (statuses may be
 * MPI_STATUSES_IGNORE; MPI_ERR_IN_STATUS when one failed). A weft thread parks.
 * Errors: MPI_ERR_ARG (n < 0, reqs NULL with n > 0). */
WEFT_API int weft_mpi_waitall(int n, MPI_Request *reqs, MPI_Status *statuses);

/* weft_mpi_waitany() waits for one of n requests as MPI_Waitany does: *index is the
 * completed one's position, or MPI_UNDEFINED if all are MPI_REQUEST_NULL. A weft
 * thread parks; the other requests stay active, untouched. Errors: MPI_ERR_ARG. */
WEFT_API int weft_mpi_waitany(int n, MPI_Request *reqs, int *index, MPI_Status *status);

/* weft_mpi_send/recv/barrier/allreduce are MPI_Send/Recv/Barrier/Allreduce; a weft
 * thread starts the nonblocking form (MPI_Isend/Irecv/Ibarrier/Iallreduce) and parks
 * in weft_mpi_wait(). See "Collectives" above for barrier and allreduce. */
WEFT_API int weft_mpi_send(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                           MPI_Comm comm);
WEFT_API int weft_mpi_recv(void *buf, int count, MPI_Datatype type, int source, int tag,
                           MPI_Comm comm, MPI_Status *status);

/* weft_mpi_sendrecv() is MPI_Sendrecv (the exchange of a halo or a ping-pong: send
 * to dest and receive from source in one call, neither order deadlocks); a weft
 * thread parks in weft_mpi_waitall() on MPI_Irecv + MPI_Isend (two requests, as
 * MPICH's own MPI_Sendrecv makes; docs/mpi.md says why not MPI_Isendrecv). status is
 * the receive's. sendbuf and recvbuf must not overlap, as in MPI_Sendrecv. Errors:
 * MPI's own, or MPI_ERR_OTHER as above. */
WEFT_API int weft_mpi_sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                               int dest, int sendtag, void *recvbuf, int recvcount,
                               MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                               MPI_Status *status);
WEFT_API int weft_mpi_barrier(MPI_Comm comm);
WEFT_API int weft_mpi_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                                MPI_Op op, MPI_Comm comm);

/* weft_mpi_lock()/weft_mpi_unlock() bracket a program's own MPI calls when weft
 * serialises (MPI provides less than MPI_THREAD_MULTIPLE); otherwise they do nothing.
 * A spinlock: hold it only across MPI calls that do not block (never across
 * weft_mpi_wait* or a blocking MPI call). Never switch. */
WEFT_API void weft_mpi_lock(void);
WEFT_API void weft_mpi_unlock(void);

/* weft_mpi_serialized() returns 1 if weft serialises MPI calls, else 0. */
WEFT_API int weft_mpi_serialized(void);

/* weft_mpi_outstanding() returns how many requests parked threads wait for now
 * (a snapshot; for tests and monitoring). */
WEFT_API int weft_mpi_outstanding(void);

#ifdef __cplusplus
}
#endif
#endif
