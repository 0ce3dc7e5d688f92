/** One segment of a spooled kept result, as GET /v1/queries/{id}/result/segments lists it. */
export interface ResultSegmentInfo {
  /** Where its bytes start in the body. */
  offset: number;
  size: number;
  /** Reads the segment straight from the store, with no other credential, until `expires_at`. */
  url?: string;
}

/**
 * The manifest of a spooled kept result: its segments in order, which put end to end are the
 * body GET /v1/queries/{id}/result sends (same format, same Content-Encoding).
 */
export interface ResultManifest {
  query_id: string;
  /** The result ended well: the segments are all of it. False while the query runs. */
  complete: boolean;
  /** Bytes of the segments listed (the whole body once complete). */
  size: number;
  content_type: string;
  content_encoding?: string;
  /** When the segments' URLs stop working (ISO 8601); absent when they have none. */
  expires_at?: string;
  segments: ResultSegmentInfo[];
}
