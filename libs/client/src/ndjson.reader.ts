/**
 * The lines of a newline-delimited body, decoded as UTF-8 (a character split across chunks is
 * kept whole). A last line without its newline is still yielded: the caller decides whether the
 * stream was complete.
 */
export async function* ndjsonLines(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let pending = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      pending += decoder.decode(value, { stream: true });
      let at: number;
      while ((at = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, at);
        pending = pending.slice(at + 1);
        if (line.trim() !== '') yield line;
      }
    }
    pending += decoder.decode();
    if (pending.trim() !== '') yield pending;
  } finally {
    // Stops the download when the caller leaves the loop early; harmless once it has ended.
    await reader.cancel().catch(() => undefined);
  }
}
