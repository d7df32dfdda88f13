from typing import Dict, Iterable, Optional

from allennlp.common.checks import ConfigurationError
from allennlp.common.file_utils import cached_path
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.instance import Instance
from allennlp.data.token_indexers import SingleIdTokenIndexer, TokenIndexer

from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.data.partial_tags import PartialTagError


@DatasetReader.register("spacy_docbin")
class SpacyDocBinReader(DatasetReader):
    """
    Reads spaCy's training corpora, `.spacy` `DocBin` files (as `spacy convert` and Prodigy's
    `data-to-spacy` write them): a sentence an instance where the `Doc` has sentence boundaries,
    else the `Doc`, with `conll_columns`' fields; a token whose entity annotation is missing
    (`token.ent_iob_ == ""`) is open.  `source` is `path:doc<i>:s<j>`.

    # Parameters

    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
    tag_scheme : `str`, optional (default = `"BIOUL"`)
    label_namespace : `str`, optional (default = `"labels"`)
    o_unconfirmed : `bool`, optional (default = `False`)
        Read the tokens spaCy marks outside any entity (`"O"`) as open too.
    """

    def __init__(
        self,
        token_indexers: Optional[Dict[str, TokenIndexer]] = None,
        tag_scheme: str = "BIOUL",
        label_namespace: str = "labels",
        o_unconfirmed: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(manual_distributed_sharding=True, manual_multiprocess_sharding=True, **kwargs)
        self._token_indexers = token_indexers or {"tokens": SingleIdTokenIndexer()}
        # Sentences are read and built as `conll_columns` reads a word and a BIO tag a line.
        self._columns = ConllColumnsReader(
            self._token_indexers,
            file_tag_scheme="BIO",
            tag_scheme=tag_scheme,
            label_namespace=label_namespace,
            o_unconfirmed=o_unconfirmed,
        )

    def _read(self, file_path: str) -> Iterable[Instance]:
        from spacy.tokens import DocBin
        from spacy.vocab import Vocab

        path = cached_path(file_path)
        try:
            docs = list(DocBin().from_disk(path).get_docs(Vocab()))
        except Exception as error:  # spaCy says what is wrong in its own words
            raise ConfigurationError(f"{file_path}: not a spaCy DocBin ({type(error).__name__}: {error})") from None
        units = (
            (index, number, sentence)
            for index, doc in enumerate(docs)
            for number, sentence in enumerate(doc.sents if doc.has_annotation("SENT_START") else [doc[:]])
        )
        for index, number, sentence in self.shard_iterable(units):
            source = f"{file_path}:doc{index}:s{number}"
            rows = [[token.text, f"{token.ent_iob_}-{token.ent_type_}".strip("-") or "-"] for token in sentence]
            try:
                words, tags, _ = self._columns.sentence_columns(rows)
            except PartialTagError as error:
                raise ConfigurationError(f"{source}: token {error.index}: {error}") from None
            metadata = {"document_id": f"doc{index}", "sentence_ids": [source], "source": source}
            yield self._columns.text_to_instance(words, tags, None, metadata)

    def text_to_instance(self, *arguments, **keywords) -> Instance:  # type: ignore
        """`conll_columns`' (words, tags, features, metadata): how predictors build instances."""
        return self._columns.text_to_instance(*arguments, **keywords)

    def apply_token_indexers(self, instance: Instance) -> None:
        instance["tokens"].token_indexers = self._token_indexers  # type: ignore
