/**
 * The transcript's events from parsed (not raw) timeline records, oldest
 * first, and where the latest turn stands: `idle` (it ended), `paused`
 * (an open question) or `streaming` (live, or cut off with its segment
 * dead); `answer` is the interrupt.response that started its latest
 * segment, if one did.
 * @param {Array<{kind: string, payload: any}>} records
 * @returns {{events: TimelineEvent[], latest: LatestTurn | null}}
 */
export function transcript(records: Array<{
    kind: string;
    payload: any;
}>): {
    events: TimelineEvent[];
    latest: LatestTurn | null;
};
export type Frame = import("./studio-wire.js").Frame;
export type TimelineEvent = {
    type: "turn";
    turn: number;
    request: any;
} | {
    type: "segment";
    segment: number;
    turn: number;
    first_seq: number;
} | {
    type: "frame";
    turn: number;
    segment: number;
    seq: number;
    frame: Frame;
} | {
    type: "answer";
    turn: number;
    response: any;
};
export type PauseFrame = Extract<Frame, {
    event: "plan.proposed";
}> | Extract<Frame, {
    event: "elicitation.request";
}>;
export type LatestTurn = {
    turn: number;
    request: any;
    lastSeq: number;
    state: "idle" | "paused" | "streaming";
    answer: any;
    pause: PauseFrame | null;
};
