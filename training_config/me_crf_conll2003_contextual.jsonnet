// me_crf with contextual word vectors (training_config/contextual.libsonnet) beside the GloVe and
// word-shape features; whole documents are folded into 512-piece segments for the transformer.
// Data: the fixtures (default) or conll2003 (training_config/data.libsonnet).
local contextual = import "contextual.libsonnet";

(import "data.libsonnet").on(contextual.add((import "me_crf_conll2003.jsonnet").fixture_config))
