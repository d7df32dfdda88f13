// Second-pass FOFE-NER, Xu (2017) §5.4: a second fofe_ner whose contexts see the first pass's entities
// as type tokens, its probabilities interpolated with the first pass's (λ = `interpolation`).
// FOFE_FIRST_PASS names the first pass's model.tar.gz (trained with fofe_ner.jsonnet on the same
// data set and overrides; keep it where it is: the second pass's archive reads it again).
// Data: the fixtures (default) or conll2003 (training_config/data.libsonnet).
local data = import "data.libsonnet";
local first_pass_archive = std.extVar("FOFE_FIRST_PASS");
local first_pass_config = (import "fofe_ner.jsonnet").fixture_config;

data.on(first_pass_config + {
  // The vocabulary is the first pass's, GloVe included.
  on_real_data+:: { glove: ["model.word_embedders.lowercase_tokens.pretrained_file"] },
  vocabulary: { type: "from_files", directory: first_pass_archive },
  model+: {
    first_pass: { type: "from_archive", archive_file: first_pass_archive },
    interpolation: 0.5,
  },
})
