"""Names the CorpusEncoder's component, executor and the pipeline's wiring share."""

# Exec properties (JSON strings): the encoders (config.EncoderEntry dicts, with each
# checkpoint's file digest) and the documents to read (config.DocumentsConfig).
ENCODERS = "encoders"
DOCUMENTS = "documents"
# The output channel.
CORPUS_VECTORS = "corpus_vectors"
# Custom properties of the CorpusVectors artifact (the console's key figure reads them).
DOCUMENTS_PROPERTY = "documents"
ENCODERS_PROPERTY = "encoders"
# Beam counters, in namespace METRICS_NAMESPACE: `texts_<encoder key>` per encoder.
METRICS_NAMESPACE = "rankpipe_corpus_encoder"
TEXTS_COUNTER = "texts"
# A progress line in the log at most this often per worker and encoder.
PROGRESS_EVERY_S = 30.0
