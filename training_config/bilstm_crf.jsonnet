// BiLSTM-CNN-CRF baseline (Ma & Hovy 2016, https://aclanthology.org/P16-1101): lower-cased word
// embeddings initialised from GloVe, a character CNN, a BiLSTM and a constrained CRF over BIOUL tags.
// It is the yardstick for every paper model in nerzoo.
//
// Trains on the fixtures by default. For CoNLL-2003 (see README "Real data"), override the data and
// the pretrained file, e.g.
//   -o '{"train_data_path": "../shared/data/conll2003/eng.train", ...}'
// The vocabulary is extended with the pretrained file's words, so test words unseen in training keep
// their GloVe vectors instead of falling to @@UNKNOWN@@ (worth ~6 F1 on CoNLL-2003 test).
//
// Batches hold sentences of similar length, so the LSTM runs over little padding (CoNLL-2003
// sentences have 1 to 124 tokens): AllenNLP's `bucket` batch sampler sorts the sentences by their
// number of tokens (`sorting_keys: ["tokens"]`) with 10% noise, cuts them into batches and shuffles
// the batches (the last, smaller batch holds the longest sentences; none is dropped). Validation
// batches go in length order without noise (`shuffle: false`), which is also the order of
// `allennlp evaluate --predictions-output-file`. A batch sampler takes the batch size: override
// `data_loader.batch_sampler.batch_size` (AllenNLP refuses `data_loader.batch_size` beside it), and
// evaluate with -o '{"validation_data_loader.batch_sampler.batch_size": 16}' rather than --batch-size.
//
// The character CNN is allennlp's `character_encoding` run on the real tokens only
// (`fast_character_encoding`: the same parameters and outputs, no work on padded slots), and its
// ids are padded by `fast_characters` (allennlp's `characters` indexer with the same ids and
// tensors, padded in one array instead of nested Python lists, and looked up without a Token per
// character). The BiLSTM is `fast_lstm`: allennlp's `lstm` (the same parameters, the same outputs
// at real tokens) run on the padded batch, each row reversed within its length for the backward
// direction, so that oneDNN's (cuDNN's) fused LSTM runs instead of a packed sequence step by step.
local glove = "fixtures/embeddings/tiny_glove.txt";
local word_dim = 50;
local char_dim = 16;
local char_filters = 64;
local lstm_dim = 200;  // per direction, as Ma & Hovy

{
  dataset_reader: {
    type: "conll_columns",
    tag_column: 3,
    file_tag_scheme: "IOB1",
    tag_scheme: "BIOUL",
    token_indexers: {
      tokens: { type: "single_id", lowercase_tokens: true },
      token_characters: { type: "fast_characters", min_padding_length: 3 },
    },
  },
  train_data_path: "fixtures/conll2003/train.txt",
  validation_data_path: "fixtures/conll2003/dev.txt",
  test_data_path: "fixtures/conll2003/test.txt",
  evaluate_on_test: true,
  vocabulary: {
    type: "from_instances",
    pretrained_files: { tokens: glove },
    min_pretrained_embeddings: { tokens: 60000 },
  },
  model: {
    type: "bilstm_crf",
    text_field_embedder: {
      token_embedders: {
        tokens: { type: "embedding", embedding_dim: word_dim, pretrained_file: glove, trainable: true },
        token_characters: {
          type: "fast_character_encoding",
          embedding: { embedding_dim: char_dim, vocab_namespace: "token_characters" },
          encoder: { type: "cnn", embedding_dim: char_dim, num_filters: char_filters, ngram_filter_sizes: [3], conv_layer_activation: "relu" },
        },
      },
    },
    encoder: { type: "fast_lstm", input_size: word_dim + char_filters, hidden_size: lstm_dim, num_layers: 1, bidirectional: true },
    dropout: 0.5,
    head: { tag_scheme: "BIOUL", constrain_crf_decoding: true },
  },
  data_loader: { batch_sampler: { type: "bucket", batch_size: 10, sorting_keys: ["tokens"] } },
  validation_data_loader: { batch_sampler: { type: "bucket", batch_size: 64, sorting_keys: ["tokens"], shuffle: false } },
  trainer: {
    // Ma & Hovy's SGD: momentum 0.9, rate 0.015 on the batch's summed loss, decayed after every epoch
    // (x0.95, close to their 0.015 / (1 + 0.05 t) over the first 30 epochs); docs/RESULTS.md compares Adam.
    optimizer: { type: "sgd", lr: 0.015, momentum: 0.9 },
    learning_rate_scheduler: { type: "exponential", gamma: 0.95 },
    grad_norm: 5.0,
    num_epochs: 50,
    patience: 5,
    validation_metric: "+f1-measure-overall",
  },
}
