// me_crf with contextual word vectors (training_config/contextual.libsonnet) beside the GloVe and
// word-shape features; whole documents are folded into 512-piece segments for the transformer.
local contextual = import "contextual.libsonnet";

contextual.add(import "me_crf_conll2003.jsonnet")
