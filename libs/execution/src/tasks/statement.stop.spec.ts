import { ProducerStoppedError, ResultWriter, StopReason } from '@app/transport';
import { StatementStop } from './statement.stop';

/** A writer whose client the test plays: `client(reason)` is its cancel or its loss. */
class FakeWriter implements ResultWriter {
  readonly endRecorded = false;
  readonly interrupts: StopReason[] = [];
  watching = false;
  /** A cancel that came before the statement started: the writer calls back at once. */
  cancelledAlready = false;
  private onStop: ((reason: StopReason) => void) | undefined;

  write(): Promise<void> {
    return Promise.resolve();
  }

  writeFinal(): Promise<void> {
    return Promise.resolve();
  }

  watch(onStop: (reason: StopReason) => void): () => void {
    this.onStop = onStop;
    this.watching = true;
    if (this.cancelledAlready) onStop('cancelled');
    return () => {
      this.onStop = undefined;
      this.watching = false;
    };
  }

  interrupt(reason: StopReason): void {
    this.interrupts.push(reason);
  }

  client(reason: StopReason): void {
    this.onStop?.(reason);
  }
}

describe(StatementStop.name, () => {
  let writer: FakeWriter;
  let stops: StopReason[];
  const onStop = (reason: StopReason) => stops.push(reason);

  beforeEach(() => {
    jest.useFakeTimers();
    writer = new FakeWriter();
    stops = [];
  });

  afterEach(() => {
    jest.useRealTimers();
  });

  it('is not stopped until a reason comes', () => {
    const stop = new StatementStop(writer, 1_000, onStop);
    expect(stop.reason).toBeUndefined();
    expect(() => stop.throwIfStopped()).not.toThrow();
    expect(writer.interrupts).toEqual([]);
    stop.dispose();
  });

  it("stops on the client's cancel: interrupts the writer and signals once", () => {
    const stop = new StatementStop(writer, undefined, onStop);
    writer.client('cancelled');
    expect(stop.reason).toBe('cancelled');
    expect(writer.interrupts).toEqual(['cancelled']);
    expect(stops).toEqual(['cancelled']);
    expect(() => stop.throwIfStopped()).toThrow(new ProducerStoppedError('cancelled'));
    stop.dispose();
  });

  it('stops at the time limit', () => {
    const stop = new StatementStop(writer, 300, onStop);
    jest.advanceTimersByTime(299);
    expect(stop.reason).toBeUndefined();
    jest.advanceTimersByTime(1);
    expect(stop.reason).toBe('timeout');
    expect(writer.interrupts).toEqual(['timeout']);
    expect(stops).toEqual(['timeout']);
    stop.dispose();
  });

  it('keeps the first reason: a time limit after a cancel changes nothing', () => {
    const stop = new StatementStop(writer, 300, onStop);
    writer.client('cancelled');
    jest.advanceTimersByTime(300);
    writer.client('consumer-gone');
    expect(stop.reason).toBe('cancelled');
    expect(writer.interrupts).toEqual(['cancelled']);
    expect(stops).toEqual(['cancelled']);
    stop.dispose();
  });

  it('keeps the first reason: a client lost after the time limit changes nothing', () => {
    const stop = new StatementStop(writer, 300, onStop);
    jest.advanceTimersByTime(300);
    writer.client('consumer-gone');
    expect(stop.reason).toBe('timeout');
    expect(stops).toEqual(['timeout']);
    stop.dispose();
  });

  it('stops at once when the client cancelled before the statement started', () => {
    writer.cancelledAlready = true;
    const stop = new StatementStop(writer, 300, onStop);
    expect(stop.reason).toBe('cancelled');
    expect(stops).toEqual(['cancelled']);
    jest.advanceTimersByTime(300);
    expect(stops).toEqual(['cancelled']);
    stop.dispose();
  });

  it('once settled, no longer listens to the client, but still to the time limit', () => {
    const stop = new StatementStop(writer, 300, onStop);
    stop.settle();
    expect(writer.watching).toBe(false);
    writer.client('cancelled');
    expect(stop.reason).toBeUndefined();
    jest.advanceTimersByTime(300);
    expect(stop.reason).toBe('timeout');
    stop.dispose();
  });

  it('once committed, listens to neither: a committed result never ends in TIME_LIMIT', () => {
    const stop = new StatementStop(writer, 300, onStop);
    jest.advanceTimersByTime(200);
    stop.committed();
    expect(writer.watching).toBe(false);
    jest.advanceTimersByTime(300);
    writer.client('cancelled');
    expect(stop.reason).toBeUndefined();
    expect(writer.interrupts).toEqual([]);
    expect(stops).toEqual([]);
  });

  it('once disposed, listens to nothing; disposing again does nothing', () => {
    const stop = new StatementStop(writer, 300, onStop);
    stop.dispose();
    stop.dispose();
    expect(writer.watching).toBe(false);
    expect(jest.getTimerCount()).toBe(0);
    writer.client('cancelled');
    jest.advanceTimersByTime(300);
    expect(stop.reason).toBeUndefined();
    expect(stops).toEqual([]);
  });
});
