import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  NoSuchKey,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { Readable } from 'node:stream';
import { ResultSpool, SpoolEntry, SpoolMissingError, SpoolUnavailableError } from './result.spool';

/** Where an S3 spool writes, and how it reaches the store. */
export interface S3SpoolOptions {
  bucket: string;
  /** Key prefix inside the bucket ('' or ending in '/'). */
  prefix: string;
  /** A non-AWS endpoint (SLUICE_SPOOL_S3_ENDPOINT): path-style addressing then. */
  endpoint?: string;
  region?: string;
  /**
   * How long a request may go without a byte from the store or to it before it fails (ms;
   * STORE_SILENCE_MS unless given): a store that takes the connection and never answers fails a
   * write or a read, never holds it.
   */
  silenceMs?: number;
  /** For tests: settings the SDK's standard chain would otherwise find (credentials). */
  client?: Partial<S3ClientConfig>;
}

/** How long a request to the store may go without a byte either way, unless told otherwise (ms). */
export const STORE_SILENCE_MS = 30_000;

/** How long a connection to the store may take to open (ms). */
const CONNECT_MS = 5_000;

/** Deletes sent at once by one remove(). */
const DELETES_AT_ONCE = 8;

function isMissing(err: unknown): boolean {
  return (
    err instanceof NoSuchKey ||
    (err as { name?: string })?.name === 'NoSuchKey' ||
    (err as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode === 404
  );
}

/**
 * The spool in an S3-compatible bucket (`s3://bucket/prefix`), through the AWS SDK v3 and its
 * standard credential chain. Checksums are sent only where S3 requires them: recent SDKs add
 * CRC32 trailers by default, which S3-compatible servers other than AWS often refuse.
 */
export class S3ResultSpool implements ResultSpool {
  readonly kind = 's3' as const;
  private readonly client: S3Client;

  constructor(private readonly options: S3SpoolOptions) {
    this.client = new S3Client({
      endpoint: options.endpoint,
      forcePathStyle: options.endpoint !== undefined,
      region: options.region ?? (options.endpoint ? 'us-east-1' : undefined),
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      // The SDK's own default waits for ever: no limit on a connection nor on a silent socket.
      requestHandler: {
        connectionTimeout: Math.min(options.silenceMs ?? STORE_SILENCE_MS, CONNECT_MS),
        socketTimeout: options.silenceMs ?? STORE_SILENCE_MS,
      },
      ...options.client,
    });
  }

  async put(key: string, parts: Buffer[]): Promise<void> {
    const body = parts.length === 1 ? parts[0] : Buffer.concat(parts);
    try {
      await this.client.send(
        new PutObjectCommand({ Bucket: this.options.bucket, Key: this.keyOf(key), Body: body }),
      );
    } catch (err) {
      throw new SpoolUnavailableError(`write ${key}`, err);
    }
  }

  async read(key: string, start = 0): Promise<Readable> {
    try {
      const reply = await this.client.send(
        new GetObjectCommand({
          Bucket: this.options.bucket,
          Key: this.keyOf(key),
          Range: start > 0 ? `bytes=${start}-` : undefined,
        }),
      );
      return reply.Body as Readable;
    } catch (err) {
      if (isMissing(err)) throw new SpoolMissingError(key);
      throw new SpoolUnavailableError(`read ${key}`, err);
    }
  }

  async remove(keys: string[]): Promise<void> {
    // One DeleteObject a key, a few at a time: S3-compatible servers differ in their DeleteObjects
    // (some have none), and a result has few segments of many MB each.
    const queue = [...keys];
    const deleteNext = async (): Promise<void> => {
      for (let key = queue.shift(); key !== undefined; key = queue.shift()) {
        try {
          await this.client.send(
            new DeleteObjectCommand({ Bucket: this.options.bucket, Key: this.keyOf(key) }),
          );
        } catch (err) {
          throw new SpoolUnavailableError(`delete ${key}`, err);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(DELETES_AT_ONCE, keys.length) }, deleteNext));
  }

  async *list(prefix = ''): AsyncIterable<SpoolEntry> {
    let token: string | undefined;
    do {
      let page: ListObjectsV2CommandOutput;
      try {
        page = await this.client.send(
          new ListObjectsV2Command({
            Bucket: this.options.bucket,
            Prefix: this.keyOf(prefix),
            ContinuationToken: token,
          }),
        );
      } catch (err) {
        throw new SpoolUnavailableError(`list ${this.keyOf(prefix)}`, err);
      }
      for (const object of page.Contents ?? []) {
        if (!object.Key) continue;
        yield {
          key: object.Key.slice(this.options.prefix.length),
          size: object.Size ?? 0,
          modifiedAt: object.LastModified?.getTime() ?? 0,
        };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  presign(key: string, seconds: number): Promise<string | undefined> {
    return getSignedUrl(
      this.client,
      new GetObjectCommand({ Bucket: this.options.bucket, Key: this.keyOf(key) }),
      { expiresIn: seconds },
    );
  }

  async check(timeoutMs: number): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.options.bucket }), {
        abortSignal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      throw new SpoolUnavailableError(`reach bucket ${this.options.bucket}`, err);
    }
  }

  close(): void {
    this.client.destroy();
  }

  private keyOf(key: string): string {
    return `${this.options.prefix}${key}`;
  }
}
