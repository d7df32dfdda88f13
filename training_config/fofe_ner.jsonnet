// FOFE-NER, local detection of entity spans: Xu (2017), "Fixed-size Ordinally-Forgetting Encoding
// and Its Applications", MSc thesis, York University, chapter 5; settings of §5.5.1 scaled to CPU.
// Every fragment of up to 7 words is classified from the FOFE codes (α = 0.5) of its left and right
// contexts (including and excluding it) and its bag of words, over a case-sensitive and a
// case-insensitive vocabulary (two embedding matrices), plus the character FOFE of the fragment in
// both directions and a character CNN (kernel heights 2-9, 16 maps each; 64-d character embeddings,
// uniform in [-1, 1]); a feed-forward net of 3 x 512 ReLU units (Glorot-uniform initialisation)
// over the entity types + NONE. Negative fragments are down-sampled at 0.36 (partial overlap) and
// 0.09 (disjoint): the thesis gives no rates; these are the defaults of the authors' released
// trainer (github.com/xmb-cipher/fofe-ner, conll2003-ner-trainer.py). The learning rate is
// multiplied by one factor every epoch so that the last epoch runs at 1/16 of the first
// (`geometric_decay`), and dropout falls linearly from 0.4 to 0.1 (`dropout_schedule`); both read
// the trainer's `num_epochs`, so an override of it keeps them in step.
// Optimiser: Adam (lr 0.001) replaces the thesis' SGD (lr 0.128; the released trainer uses momentum
// 0.9), which is this override:
//   -o '{"trainer.optimizer": {"type": "sgd", "lr": 0.128, "momentum": 0.9}}'
// Vocabulary: built from the training data only (`datasets_for_vocab_creation`), as the thesis'
// vocabularies come from other text than dev and test. Words seen once in training map to the OOV
// token (`min_count` 2), so the OOV vector is trained and a dev or test word never seen in training
// gets it rather than an untrained random vector; the case-insensitive vocabulary also keeps the
// first 60,000 GloVe words with their vectors.
// Scaled to CPU: 50-d word embeddings (the case-insensitive ones from GloVe 6B 50d in place of the
// thesis' 256-d RCV1 word2vec), batches of 32 sentences (~500 sampled fragments, the thesis'
// mini-batch of 512) and 30 epochs in place of 128. Highest-first decoding at threshold 0.5.
//
// Batches hold sentences of similar length (the `bucket` batch sampler sorted by tokens, 10% noise,
// shuffled batches; validation batches in length order without noise): a batch enumerates
// max_span_width fragments per position of its longest sentence, so fragments, their codes and
// their characters grow with the padded length. See bilstm_crf.jsonnet for overriding batch sizes.
//
// Trains on the fixtures by default. For CoNLL-2003 (see README "FOFE-NER"), override the data and
// the pretrained file:
//   -o '{"train_data_path": "../shared/data/conll2003/eng.train",
//        "validation_data_path": "../shared/data/conll2003/eng.testa",
//        "test_data_path": "../shared/data/conll2003/eng.testb",
//        "model.word_embedders.lowercase_tokens.pretrained_file": "<glove.6B.50d>",
//        "vocabulary.pretrained_files.lowercase_tokens": "<glove.6B.50d>"}'
// Nested entities: read JSON lines with '{"dataset_reader.file_format": "jsonl", "dataset_reader.conll":
// null}' (format in fixtures/nested/README.md) and decode two
// levels, outer entities longest-first, then inside each the best-scoring ones:
// '{"model.decoding": ["longest_first", "highest_first"], "model.thresholds": [0.5, 0.5]}'
// (highest-first at the outer level would let a confident inner entity remove the outer one).
// The second pass (§5.4) is training_config/fofe_ner_second_pass.jsonnet.
// Character ids: `fast_characters`, allennlp's `characters` padded faster (see bilstm_crf.jsonnet).
local glove = "fixtures/embeddings/tiny_glove.txt";
local word_dim = 50;

{
  dataset_reader: {
    type: "entity_spans",
    file_format: "conll",
    conll: { tag_column: 3, file_tag_scheme: "IOB1" },
    token_indexers: {
      tokens: { type: "single_id", namespace: "tokens" },
      lowercase_tokens: { type: "single_id", namespace: "lowercase_tokens", lowercase_tokens: true },
      token_characters: { type: "fast_characters", min_padding_length: 1 },
    },
  },
  train_data_path: "fixtures/conll2003/train.txt",
  validation_data_path: "fixtures/conll2003/dev.txt",
  test_data_path: "fixtures/conll2003/test.txt",
  evaluate_on_test: true,
  datasets_for_vocab_creation: ["train"],
  vocabulary: {
    type: "from_instances",
    min_count: { tokens: 2, lowercase_tokens: 2 },
    pretrained_files: { lowercase_tokens: glove },
    min_pretrained_embeddings: { lowercase_tokens: 60000 },
  },
  model: {
    type: "fofe_ner",
    word_embedders: {
      tokens: { type: "embedding", embedding_dim: word_dim, vocab_namespace: "tokens" },
      lowercase_tokens: {
        type: "embedding",
        embedding_dim: word_dim,
        vocab_namespace: "lowercase_tokens",
        pretrained_file: glove,
        trainable: true,
      },
    },
    max_span_width: 7,
    alpha: 0.5,
    character_dim: 64,
    cnn_filters: 16,
    cnn_kernel_sizes: [2, 3, 4, 5, 6, 7, 8, 9],
    feedforward: { num_layers: 3, hidden_dims: 512, activations: "relu", dropout: 0.4 },
    dropout: 0.4,
    overlap_sample_rate: 0.36,
    disjoint_sample_rate: 0.09,
    decoding: ["highest_first"],
    thresholds: [0.5],
    initializer: { regexes: [["feedforward.*weight|output_layer.weight", { type: "xavier_uniform" }]] },
  },
  data_loader: { batch_sampler: { type: "bucket", batch_size: 32, sorting_keys: ["tokens"] } },
  validation_data_loader: { batch_sampler: { type: "bucket", batch_size: 64, sorting_keys: ["tokens"], shuffle: false } },
  trainer: {
    optimizer: { type: "adam", lr: 0.001 },
    learning_rate_scheduler: { type: "geometric_decay", final_factor: 1 / 16 },
    callbacks: [{ type: "dropout_schedule", start: 0.4, end: 0.1 }],
    grad_norm: 5.0,
    num_epochs: 30,
    patience: 10,
    validation_metric: "+f1-measure-overall",
  },
}
