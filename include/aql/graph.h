/* SPDX-License-Identifier: MIT */
/*
 * Recorded graphs: what a time step submits, recorded once and replayed
 * with one call. aql_graph_begin() puts a queue in recording mode: typed
 * launches (aql_launch(), AQL_LAUNCH) and copies (aql_queue_copy()) made
 * on it are checked as always but recorded, not run, and raw packets are
 * recorded with aql_graph_record_packet(). A launch or copy on another
 * queue of the same agent whose cfg.after names a recorded completion
 * joins that queue to the recording (as CUDA's stream capture does): a
 * replay runs everything recorded, on every joined queue, in the order it
 * was recorded, each packet after the one before (the barrier bit), so
 * dependencies inside the graph always hold.
 *
 * aql_graph_instantiate() builds the packets and kernarg segments once.
 * aql_graph_exec_replay() submits them all to a queue of the recording
 * agent and gives one completion: on the CPU and AMD agents it reserves
 * every slot with one fetch-add on the write index, writes the bodies,
 * then the headers (the first last), and rings the doorbell once; an
 * agent with a graph engine of its own (CUDA) replays it there.
 *
 * Typed buffers keep their directions: a replay finds which of its
 * buffers are stale on the agent and copies them in first, as a launch
 * would, and leaves what the kernels write on the agent; host access
 * (aql_buf_data() and friends) waits for the replay as for a launch.
 * Buffers must outlive the executable graphs that name them (or be
 * rebound with aql_graph_exec_set_arg()).
 */
#ifndef AQL_GRAPH_H
#define AQL_GRAPH_H

#include <stdint.h>
#include <aql/completion.h>
#include <aql/launch.h>
#include <aql/packet.h>
#include <aql/queue.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aql_graph aql_graph;		/* a recording */
typedef struct aql_graph_exec aql_graph_exec;	/* an instantiated graph */

/*
 * Start recording on queue into a new graph. Until aql_graph_end(), the
 * queue's typed launches and copies are recorded (each checked as when
 * run; one that fails records nothing) and give a recorded completion:
 * one that later recorded work on the graph's queues may name in after
 * (and so join another queue to the recording), and that cannot be
 * waited for (aql_completion_wait() fails with AQL_ERR_INVALID_ARG
 * saying so; a replay's completion is the one to wait for). A recorded
 * launch's after may name nothing but recorded completions of its graph.
 *
 * Errors: AQL_ERR_INVALID_ARG (NULL); AQL_ERR_QUEUE_ERROR (the queue is
 * in its error state, with its reason); AQL_ERR_BUSY (the queue records
 * another graph already, never ended: the first recording goes on);
 * AQL_ERR_NOMEM. A recording never ended ends when its graph is destroyed
 * (aql_graph_destroy()); a queue destroyed while it records leaves the
 * recording, which is then incomplete: aql_graph_end() ends it on the
 * other queues and fails naming the queue, and aql_graph_instantiate()
 * refuses it likewise. Thread safe; record on one queue from one thread
 * at a time.
 */
aql_status aql_graph_begin(aql_queue *queue, aql_graph **out);

/*
 * Record a raw packet (kernel dispatch with kernarg memory of the
 * caller's, barrier-AND/OR, BARRIER_VALUE, agent dispatch) on a queue
 * that records: the replay writes it as given, its completion signal
 * included (one of 0 gets the replay's). Its memory must live as long
 * as the executable graphs made from the recording. aql_queue_submit()
 * and aql_queue_reserve() on a recording queue are not recorded: they
 * run now. Errors: AQL_ERR_INVALID_ARG (NULL, the queue records nothing,
 * an INVALID packet), AQL_ERR_NOMEM. Thread safe.
 */
aql_status aql_graph_record_packet(aql_queue *queue, const aql_packet *packet);

/*
 * For a layer above libaql whose recorded packets (aql_graph_record_packet())
 * stand for work run beside the queue (libaql-mpi's operations, which its
 * communication agent runs): replayed(user, queue), if not NULL, runs after
 * each replay of an executable graph made from the recording has been
 * submitted to queue, on the replaying thread, with no lock of libaql held;
 * release(user), if not NULL, runs once the recording and every executable
 * graph made from it have been destroyed, on the thread that destroyed the
 * last. The packets may run before replayed() returns: they must wait for
 * what it starts (a BARRIER_VALUE on a signal of the layer's).
 * Errors: AQL_ERR_INVALID_ARG (NULL, the queue records nothing; release
 * does not run then), AQL_ERR_NOMEM. Thread safe.
 */
typedef struct aql_graph_hook {
	void (*replayed)(void *user, aql_queue *queue);
	void (*release)(void *user);
} aql_graph_hook;

aql_status aql_graph_record_hook(aql_queue *queue, const aql_graph_hook *hook, void *user);

/*
 * Nonzero while queue records a graph (aql_graph_begin() on it, or joined
 * to one). Thread safe; the answer may change at once where another
 * thread begins or ends the recording.
 */
int aql_graph_is_recording(aql_queue *queue);

/*
 * End the recording on all its queues: they run their work again.
 * Errors: AQL_ERR_INVALID_ARG (NULL, ended already, or one of its queues
 * was destroyed while recording: ended all the same). Thread safe.
 */
aql_status aql_graph_end(aql_graph *graph);

/*
 * Build the packets and kernarg segments of an ended recording once;
 * buffers are bound to the agent now. The graph may be destroyed after.
 * Errors: AQL_ERR_INVALID_ARG (NULL, still recording, nothing recorded),
 * AQL_ERR_NOMEM, those of aql_buf_bind() and the agent's. Thread safe.
 */
aql_status aql_graph_instantiate(aql_graph *graph, aql_graph_exec **out);

/* Free a recording (ending it first if it is not ended). NULL is accepted. */
void aql_graph_destroy(aql_graph *graph);

/*
 * Replay exec on queue, after the queue's earlier typed work (all its
 * packets carry the barrier bit), copying stale buffers in first; *done
 * (if not NULL) gets the completion of the whole replay, valid until the
 * queue is destroyed. Replays may be in flight on several queues of the
 * agent at once, and changes made between replays never reach a replay
 * already submitted (each replay's kernargs are a copy).
 *
 * Errors: AQL_ERR_INVALID_ARG (NULL; queue of an agent other than the
 * recording one; more packets than the queue holds); AQL_ERR_BUSY and
 * others as aql_launch() has them for its buffers; AQL_ERR_QUEUE_FULL,
 * AQL_ERR_QUEUE_ERROR from the queue. On any error nothing was
 * submitted. Thread safe.
 */
aql_status aql_graph_exec_replay(aql_graph_exec *exec, aql_queue *queue, aql_completion *done);

/*
 * Change argument arg of the graph's launch-th typed launch (counted
 * from 0 in recording order, over all its queues) for later replays:
 * a scalar of the parameter's type, or a buffer of the same element
 * type and element count as the one recorded. Checked as aql_launch()
 * checks it, with the same messages (kernel, argument index and name,
 * both types), and AQL_IN refused where the kernel writes. Errors:
 * AQL_ERR_INVALID_ARG (those, NULL, launch or arg out of range, a
 * buffer of another size), the agent's; nothing changed then. Thread
 * safe.
 */
aql_status aql_graph_exec_set_arg(aql_graph_exec *exec, uint32_t launch, uint32_t arg,
				  aql_arg value);

/* Typed launches and packets one replay writes at least (no copies). */
uint32_t aql_graph_exec_launches(const aql_graph_exec *exec);
uint32_t aql_graph_exec_packets(const aql_graph_exec *exec);

/*
 * Free exec. Errors: AQL_ERR_BUSY naming a replay in flight (its number
 * and queue): wait for its completion first; nothing was freed then.
 * NULL is accepted. Thread safe against replays of other executables.
 */
aql_status aql_graph_exec_destroy(aql_graph_exec *exec);

#ifdef __cplusplus
}
#endif

#endif
