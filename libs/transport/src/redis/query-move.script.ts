/** A move of a query's record, as moveQuery takes it: the record's key and its ARGV. */
export interface QueryMove {
  meta: string;
  args: string[];
}
