"""CorpusEncoder: every document of the collection embedded once per sentence encoder, as a
`rankpipe.CorpusVectors` artifact (docs/corpus-encoder.md)."""
