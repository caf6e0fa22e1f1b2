// A TypeScript app as a front-end team writes it: the package's types
// come through its exports (`types/`), frames narrow on `event`.
import { StudioClient, type Frame } from '@ledgerwire/client/studio';
import { HarnessClient } from '@ledgerwire/client/harness';
import { useConversation } from '@ledgerwire/client/react';

const studio = new StudioClient({ baseUrl: 'http://127.0.0.1:8080', token: () => 'token' });
const chat = studio.conversation('c1');

export function render(frame: Frame): string {
  switch (frame.event) {
    case 'message.delta': return frame.text;
    case 'plan.proposed': return frame.interrupt_id;
    case 'error': return frame.error.retry;
    default: return frame.event;
  }
}

export async function run(): Promise<void> {
  const outcome: 'done' | 'paused' | 'stopped' | 'failed' | 'refused' | 'gone' = await chat.ask('Population of Peru');
  const { status, pause } = chat.getSnapshot();
  const paused: boolean = status === 'paused' && pause !== null;
  if (paused && outcome === 'paused') await chat.approve();
  const harness = new HarnessClient({ conversationId: 'c1' });
  const main = harness.main;
  if (main?.status === 'paused_plan') await harness.approve(main.pause?.interrupt_id ?? '');
  void useConversation;
}
