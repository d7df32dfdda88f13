// fofe_ner with contextual word vectors (training_config/contextual.libsonnet) as a third word
// vocabulary: FOFE codes of the mixed transformer vectors beside those of the two word embeddings;
// everything else as in fofe_ner.jsonnet.
// Data: the fixtures (default) or conll2003 (training_config/data.libsonnet).
local contextual = import "contextual.libsonnet";

(import "data.libsonnet").on(contextual.add((import "fofe_ner.jsonnet").fixture_config))
