from typing import Dict, Iterable, List, Optional

from allennlp.common.checks import ConfigurationError
from allennlp.common.file_utils import cached_path
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.instance import Instance
from allennlp.data.token_indexers import SingleIdTokenIndexer, TokenIndexer
from nerzoo_runtime.tag_scheme import check_tag_scheme

from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.data.partial_tags import PartialTagError, partial_tags


@DatasetReader.register("spacy_docbin")
class SpacyDocBinReader(DatasetReader):
    """
    Reads spaCy's training corpora: `.spacy` files of serialised `Doc`s (a `DocBin`), as `spacy
    convert`, Prodigy's `data-to-spacy` and spaCy's own `DocBin.to_disk` write them.  Each
    instance is a sentence where the `Doc` has sentence boundaries, else the whole `Doc`, with the
    fields of `conll_columns`: `tokens`, `tags` (the entities in `tag_scheme`; a token whose entity
    annotation is missing in spaCy, `token.ent_iob_ == ""`, is open: `nerzoo.data.partial_tags`) and
    `metadata` (`words`, `document_id`, `sentence_ids`, `sentence_spans`, `source` =
    `path:doc<i>:s<j>`).

    Registered as a `DatasetReader` with name "spacy_docbin".

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
        # Instances are built as `conll_columns` builds them, with this reader's options.
        self._columns = ConllColumnsReader(
            self._token_indexers, file_tag_scheme="BIO", tag_scheme=tag_scheme, label_namespace=label_namespace
        )
        self.tag_scheme = check_tag_scheme(tag_scheme)
        self.o_unconfirmed = o_unconfirmed

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
            tags: List[str] = ["-" if token.ent_iob_ == "" else token.ent_iob_ for token in sentence]
            tags = [tag if tag in ("-", "O") else f"{tag}-{token.ent_type_}" for tag, token in zip(tags, sentence)]
            try:
                marked = partial_tags(tags, "BIO", self.tag_scheme, "-", self.o_unconfirmed)
            except PartialTagError as error:
                raise ConfigurationError(f"{source}: token {error.index}: {error}") from None
            words = [token.text for token in sentence]
            metadata = {"document_id": f"doc{index}", "sentence_ids": [source], "source": source}
            yield self._columns.text_to_instance(words, marked, None, metadata)

    def text_to_instance(self, words: List[str], tags: Optional[List[Optional[str]]] = None) -> Instance:  # type: ignore
        return self._columns.text_to_instance(words, tags)

    def apply_token_indexers(self, instance: Instance) -> None:
        instance["tokens"].token_indexers = self._token_indexers  # type: ignore
