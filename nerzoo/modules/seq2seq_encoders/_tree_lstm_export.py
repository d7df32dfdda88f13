"""The Tree-LSTM's export form under the name `allennlp export` imports: `ChildSumTreeLstm.export_form()`."""

from nerzoo.modules.seq2seq_encoders.child_sum_tree_lstm import PaddedTreeLstm as ExportedTreeLstm  # noqa: F401
