package sqltext

// askedSeqsSQL is the messages asked for (askSeqs), for the FROM of an UPDATE or the USING of
// a DELETE, as w(entity, seq).
const askedSeqsSQL = ` unnest(@entities::bigint[], @seqs::bigint[]) w(entity, seq)`
