/* SPDX-License-Identifier: MIT */
/*
 * libaql-mpi: typed buffers in MPI calls. Each call takes an aql_buf (a
 * root or a view) and, optionally, a layout of its elements, and derives
 * MPI's datatype and count from the element type: no call computes a byte
 * size. A strided layout becomes an MPI vector or subarray datatype over
 * the buffer's own storage, never a packed copy.
 *
 * Where the data is: MPI is given the buffer's host storage (pinned,
 * device-visible host memory). A buffer whose current copy is on a GPU
 * agent is first brought back there, as host access does (aql/buffer.h):
 * a send reads the host copy (aql_buf_host_const()), a receive writes it
 * (aql_buf_host()), so the next launch that reads the buffer copies the
 * received data to its agent. aql_mpi_gpu_aware() says whether the MPI
 * library could take device pointers instead; libaql-mpi always stages
 * (docs/mpi.md says why).
 *
 * Errors: MPI's own errors come back only where the communicator's error
 * handler returns them (MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
 * with MPI's default handler MPI aborts the job. A returned MPI error is
 * AQL_ERR_SYSTEM, and aql_error_message() gives the call, this rank, the
 * peer, the tag and MPI's error string.
 *
 * Built only where meson finds an MPI; link with pkg-config aql-mpi. The
 * library is built against one MPI implementation (the one whose <mpi.h>
 * the program includes): a program must use that same one.
 */
#ifndef AQL_MPI_H
#define AQL_MPI_H

#include <stdint.h>
#include <mpi.h>
#include <aql/buffer.h>
#include <aql/completion.h>
#include <aql/queue.h>
#include <aql/status.h>

#ifdef __cplusplus
extern "C" {
#endif

enum aql_mpi_layout_kind {
	AQL_MPI_WHOLE = 0,	/* every element of the buffer, in order */
	AQL_MPI_VECTOR,		/* blocks of blocklen elements, stride apart */
	AQL_MPI_SUBARRAY,	/* a box of the buffer's shape (ndim >= 2) */
};

/*
 * Which elements of a buffer a call moves, in element units of the
 * buffer (its first element is 0; for a view, the view's first).
 * - AQL_MPI_VECTOR: elements first + i * stride + j, for i < blocks and
 *   j < blocklen (MPI_Type_vector): a column of a row-major 2-D array
 *   is { .blocks = rows, .blocklen = 1, .stride = columns }.
 * - AQL_MPI_SUBARRAY: the box start[d] .. start[d] + size[d] of each of
 *   the buffer's ndim dimensions, row-major (MPI_Type_create_subarray);
 *   the buffer must be a root created with a shape.
 * A NULL layout is AQL_MPI_WHOLE.
 */
typedef struct aql_mpi_layout {
	enum aql_mpi_layout_kind kind;
	uint64_t first, blocks, blocklen, stride;	/* AQL_MPI_VECTOR */
	uint64_t start[4], size[4];			/* AQL_MPI_SUBARRAY */
} aql_mpi_layout;

/*
 * The predefined MPI datatype of one element of a built-in type:
 * MPI_INT8_T .. MPI_UINT64_T, MPI_FLOAT, MPI_DOUBLE. Errors:
 * AQL_ERR_INVALID_ARG (NULL; a registered struct, which has none:
 * aql_mpi_describe() makes a contiguous datatype of its bytes, which can
 * be sent, not reduced). Thread safe.
 */
aql_status aql_mpi_type(const aql_type *type, MPI_Datatype *out);

/*
 * The datatype and count that describe layout over buf: *count elements
 * of *datatype, starting at element *first of buf. *datatype is buf's
 * element datatype for AQL_MPI_WHOLE (*count: buf's count), and a new
 * committed derived datatype (*count 1) otherwise, which *derived says
 * the caller frees with MPI_Type_free(). For use with MPI calls that
 * libaql-mpi does not wrap. Errors: AQL_ERR_INVALID_ARG (a layout that
 * reaches past buf, a zero extent, a subarray of a buffer without shape or
 * of a view, a count above MPI's INT_MAX: each message names the buffer
 * and the limit), AQL_ERR_SYSTEM (MPI refused).
 */
aql_status aql_mpi_describe(aql_buf *buf, const aql_mpi_layout *layout, MPI_Datatype *datatype,
			    int *count, uint64_t *first, int *derived);

/*
 * MPI_Send / MPI_Recv of layout over buf. A send reads the host copy of
 * buf (brought back from a GPU agent first where only it is current); a
 * receive writes it and marks it changed on the host. status (receive)
 * may be MPI_STATUS_IGNORE. A message longer than the layout is MPI's
 * MPI_ERR_TRUNCATE (AQL_ERR_SYSTEM, naming it). Errors: those of
 * aql_mpi_describe(), AQL_ERR_BUSY (host access to buf refused: work in
 * flight uses it, or the copy back failed; the message says which, and
 * nothing was sent or received), AQL_ERR_SYSTEM (MPI returned an error). Thread safety: as
 * MPI's provided thread level allows.
 */
aql_status aql_mpi_send(aql_buf *buf, const aql_mpi_layout *layout, int dest, int tag,
			MPI_Comm comm);
aql_status aql_mpi_recv(aql_buf *buf, const aql_mpi_layout *layout, int source, int tag,
			MPI_Comm comm, MPI_Status *status);

/*
 * MPI_Bcast of layout over buf from root: read on root, written on the
 * others. Errors: as aql_mpi_send().
 */
aql_status aql_mpi_bcast(aql_buf *buf, const aql_mpi_layout *layout, int root, MPI_Comm comm);

/*
 * MPI_Allreduce of every element of send into recv, with op, both of the
 * same built-in scalar type and count; send NULL reduces recv in place
 * (MPI_IN_PLACE). Errors: AQL_ERR_INVALID_ARG (a struct type, different
 * types or counts, naming both buffers), as aql_mpi_send().
 */
aql_status aql_mpi_allreduce(aql_buf *send, aql_buf *recv, MPI_Op op, MPI_Comm comm);

/*
 * MPI_Gather of layout over send from each rank into recv on root, rank
 * r's elements at r * n of recv (n: the layout's element count), in
 * order; recv is ignored on the other ranks (may be NULL there). On root,
 * recv must have send's type and at least size * n elements. Errors: as
 * aql_mpi_send(), AQL_ERR_INVALID_ARG (recv's type or count, naming both).
 */
aql_status aql_mpi_gather(aql_buf *send, const aql_mpi_layout *layout, aql_buf *recv, int root,
			  MPI_Comm comm);

/*
 * Queue-ordered communication: a send, receive or allreduce put into an
 * aql queue (of any agent), ordered like any other packet. It starts once
 * the packets submitted to queue before it have completed (a barrier
 * packet marks that), and the packets submitted to queue after it wait
 * for it (a barrier packet on its completion); *done (may be NULL) gets
 * its completion, for launches on other queues (cfg.after) or a host
 * wait. No host thread waits in between: libaql-mpi's communication agent,
 * a thread of its own started on first use, posts the operation with
 * MPI_Isend / MPI_Irecv / MPI_Iallreduce when it may start and tests it
 * until it ends.
 *
 * MPI's thread level (MPI_Query_thread()): MPI_THREAD_MULTIPLE: the
 * agent calls MPI beside the program's threads. MPI_THREAD_SERIALIZED:
 * the agent calls MPI only while queue-ordered work is pending, and the
 * program must make no MPI call (the blocking aql_mpi_* ones included)
 * until that work has ended (its completions). MPI_THREAD_FUNNELED and MPI_THREAD_SINGLE: refused
 * (AQL_ERR_UNSUPPORTED naming the level): only the main thread may call
 * MPI there.
 *
 * Data: MPI reads and writes buf's host storage (pinned host memory),
 * staged in queue order where buf's current copy is on an agent with
 * memory of its own (a GPU), whose queue queue must then be: a copy back
 * to the host (aql_buf_to_host()) is queued before an operation that
 * reads buf (a send, an allreduce's input) or writes only part of it (a
 * receive with a layout), and what a receive or allreduce writes counts
 * as changed on the host (aql_buf_host_written()), so the next launch
 * that reads it copies it to the agent, after the operation. Buffers do
 * not count these operations as work in flight: host access or a launch
 * on another queue not ordered after *done is not refused while one uses
 * the buffer.
 *
 * In a graph: on a queue that records (aql_graph_begin()), the operation
 * is recorded, not run, and each replay of an executable graph made from
 * the recording runs it in the replay's order (docs/mpi.md); done must be
 * NULL there (the replay's completion covers it), and a buffer on an
 * agent with memory of its own is refused (AQL_ERR_UNSUPPORTED: nothing
 * is staged at a replay). Replay such graphs on one queue at a time.
 *
 * Faults: an MPI call that returns an error (on a communicator with
 * MPI_ERRORS_RETURN), a truncated message included, puts queue into its
 * error state (aql_queue_set_error()) with MPI's error string, this rank,
 * the peer and the tag; *done's signal becomes -1, and the packets behind
 * it are dropped. The queue's error callback then runs on the
 * communication agent's thread (on the caller's for aql_mpi_cancel(),
 * aql_queue_destroy() and a replay), holding libaql-mpi's lock: it must
 * not call libaql-mpi.
 * Errors: those of aql_mpi_describe(), AQL_ERR_UNSUPPORTED
 * (thread level; in a graph, a buffer on an agent of its own memory),
 * AQL_ERR_INVALID_ARG (a buffer on another agent than queue's, where it
 * must be staged; done while recording), those of aql_queue_submit(),
 * aql_buf_to_host(), aql_buf_host_written() and, recording,
 * aql_graph_record_packet(). Thread safe.
 */
aql_status aql_mpi_enqueue_send(aql_queue *queue, aql_buf *buf, const aql_mpi_layout *layout,
				int dest, int tag, MPI_Comm comm, aql_completion *done);
aql_status aql_mpi_enqueue_recv(aql_queue *queue, aql_buf *buf, const aql_mpi_layout *layout,
				int source, int tag, MPI_Comm comm, aql_completion *done);
/* Every element of send into recv with op, as aql_mpi_allreduce(); send NULL: in place. */
aql_status aql_mpi_enqueue_allreduce(aql_queue *queue, aql_buf *send, aql_buf *recv, MPI_Op op,
				     MPI_Comm comm, aql_completion *done);

/*
 * Cancel the queue-ordered operations of queue that have not ended:
 * those not started are dropped, a posted receive is cancelled
 * (MPI_Cancel), a posted send or allreduce is waited for (MPI cannot take
 * them back); each one's completion signal becomes -1 unless it had
 * completed; if any was cancelled, the queue enters its error state
 * (the packets behind them are dropped). Returns once none of queue's
 * operations is left, and frees libaql-mpi's state for queue; the
 * completions handed out stay valid (they read done, or failed).
 * aql_queue_destroy() does the same first, through a destroy hook
 * (aql_queue_add_destroy_hook()), so a queue may be destroyed with
 * receives pending, a waiter on their completions waking with
 * AQL_ERR_QUEUE_ERROR; a posted send that no rank receives makes either
 * call wait. Errors: AQL_ERR_INVALID_ARG (NULL). Thread safe, but not
 * concurrently with an enqueue on the same queue.
 */
aql_status aql_mpi_cancel(aql_queue *queue);

/*
 * Stop the communication agent (after cancelling everything pending, as
 * aql_mpi_cancel() does for each queue); call before MPI_Finalize(). A
 * later enqueue starts it again. Thread safe.
 */
void aql_mpi_shutdown(void);

/*
 * Whether the MPI library says it takes device pointers of agents of
 * kind (AQL_AGENT_NVIDIA: Open MPI's MPIX_Query_cuda_support(), MPICH's
 * MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA); AQL_AGENT_AMD: MPICH's
 * MPIX_GPU_SUPPORT_HIP), asked at run time after MPI_Init; 0 where the
 * library has no such query or says no (Debian 12's MPICH 4.0.2 and Open
 * MPI 4.1.4 both say no). Thread safe.
 */
int aql_mpi_gpu_aware(enum aql_agent_kind kind);

#ifdef __cplusplus
}
#endif

#endif
