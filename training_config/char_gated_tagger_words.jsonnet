// Char-gated tagger, Rei, Crichton & Pyysalo (2016), https://aclanthology.org/C16-1030: the
// word-only variant (the blog's "Word-based" column), the same BiLSTM-CRF over word embeddings alone.
// Data: the fixtures (default, the chunk column) or conll2000_chunking (training_config/data.libsonnet).
(import "data.libsonnet").on((import "char_gated_tagger.libsonnet")("words"))
