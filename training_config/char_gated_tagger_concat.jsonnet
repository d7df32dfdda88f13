// Char-gated tagger, Rei, Crichton & Pyysalo (2016), https://aclanthology.org/C16-1030: the
// character-concatenation variant ("Char concat"), [x; m] instead of the gate, no cosine loss.
// Data: the fixtures (default, the chunk column) or conll2000_chunking (training_config/data.libsonnet).
(import "data.libsonnet").on((import "char_gated_tagger.libsonnet")("concatenate"))
