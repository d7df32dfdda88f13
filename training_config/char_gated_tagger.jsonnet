// Char-gated sequence labeller, Rei, Crichton & Pyysalo (2016), https://aclanthology.org/C16-1030
// ("Char attn"): word and character representations mixed by a learned gate, with the cosine loss;
// BiLSTM, tanh layer, CRF (char_gated_tagger.libsonnet, with the two other variants).
// Data: the fixtures (default, the chunk column) or conll2000_chunking (training_config/data.libsonnet).
(import "data.libsonnet").on((import "char_gated_tagger.libsonnet")("gate"))
