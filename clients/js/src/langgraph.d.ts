import type { BaseCheckpointSaver, Checkpoint, CheckpointListOptions, CheckpointMetadata, CheckpointTuple, ChannelVersions, PendingWrite, SerializerProtocol } from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { ArtifactdClient, Verification } from "./index.js";

export declare const CHECKPOINT_TYPE: "langgraph_checkpoint";
export declare const WRITES_TYPE: "langgraph_writes";
export declare const HEAD_TYPE: "langgraph_head";

/** Another writer moved the thread past the checkpoint this write extends; nothing was written. */
export declare class CheckpointConflictError extends Error {
  threadId: string;
  checkpointNs: string;
  expected: string | null;
  found: string | null;
}

/** The artifact id a put or putWrites would write holds another namespace's checkpoint or writes, written by an earlier saver that left ':' in checkpoint and task ids; nothing was written. */
export declare class LegacyIdError extends Error {
  id: string;
}

export interface ArtifactdSaverOptions {
  client?: ArtifactdClient;
  /** Prepended to a thread id to name its context (default "lg-"). */
  prefix?: string;
  quarantine?: "enforce" | "observe";
  /** Re-reads after a stale parent caused by this thread's own pending writes (default 5); a put or putWrites tries at most 20 times as often when the head keeps moving. */
  attempts?: number;
  serde?: SerializerProtocol;
}

/** A LangGraph.js checkpointer over artifactd: one context per thread, one commit per checkpoint. */
export declare class ArtifactdSaver extends BaseCheckpointSaver<number> {
  constructor(options?: ArtifactdSaverOptions);
  client: ArtifactdClient;
  setup(): Promise<void>;
  contextFor(threadId: string): Promise<string>;
  threadContext(threadId: string): Promise<string>;
  getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined>;
  list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple>;
  put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig>;
  putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void>;
  /** Deletes the thread's checkpoints and writes: one commit, or several (not atomic) when one request body would not hold them. */
  deleteThread(threadId: string): Promise<void>;
  commitOf(config: RunnableConfig): Promise<{ context: string; commit: string }>;
  verify(config: RunnableConfig): Promise<Verification & { context: string }>;
}
