import os
import re
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.common.file_utils import cached_path
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.fields import Field, ListField, MetadataField, SequenceLabelField, TensorField, TextField
from allennlp.data.instance import Instance
from allennlp.data.token_indexers import SingleIdTokenIndexer, TokenIndexer
from allennlp.data.tokenizers import SpacyTokenizer, Token, Tokenizer

from nerzoo.data.json_lines import is_int, json_object, numbered_lines, type_name

# The one token of an empty (or all-whitespace) title or text: every post's TextField is non-empty.
EMPTY_POST_TOKEN = "@@EMPTY@@"
# Padding of the `links` field in a batch of threads of different lengths.
LINK_PADDING = -1
# The dialogue acts of Kim, Wang and Baldwin (2010), "Tagging and linking web forum posts" (CNET
# threads).  The reader accepts any label strings; this is the set the fixtures use.
CNET_DIALOGUE_ACTS = (
    "Question-Question",
    "Question-Add",
    "Question-Confirmation",
    "Question-Correction",
    "Answer-Answer",
    "Answer-Add",
    "Answer-Confirmation",
    "Answer-Correction",
    "Answer-Objection",
    "Resolution",
    "Reproduction",
    "Other",
)
# http(s):// or www. up to the next whitespace, without trailing punctuation ("see www.a.org." or
# "did you try https://a.org/fix?" end before the final "." / "?").
URL_PATTERN = re.compile(r"(?:https?://|www\.)\S*[^\s.,;:!?)\]}>'\"]", re.IGNORECASE)
# How many words of the text stand for an untitled post in the metadata `words`.
_PREVIEW_WORDS = 8


class ThreadFormatError(ConfigurationError):
    """
    Malformed forum thread.  The message reads `"<where>: thread <id>, post <t>: <problem>"`, where
    `where` is `path:line` for a file (`"<input>"` for `text_to_instance` without a source) and the
    thread and post parts appear when known.
    """

    def __init__(self, where: str, message: str, thread_id: Optional[str] = None, post: Optional[int] = None) -> None:
        subject = [f"thread {thread_id}"] if thread_id is not None else []
        subject += [f"post {post}"] if post is not None else []
        super().__init__(f"{where}: " + (", ".join(subject) + ": " if subject else "") + message)


class ForumPost(NamedTuple):
    """One checked post: `links` and `dialogue_acts` are `None` for an unlabelled thread."""

    title: str
    text: str
    author: Optional[str]
    initiator: bool
    links: Optional[List[int]]
    dialogue_acts: Optional[List[str]]


def validate_thread_posts(posts: Any, where: str, thread_id: Optional[str] = None) -> List[ForumPost]:
    """
    Checks the `posts` of one thread (parsed JSON) and returns them as `ForumPost`s, with
    `initiator` filled in where the post does not give it.  The first problem raises
    `ThreadFormatError`; see `ThreadDiscourseReader` for the rules.
    """

    def fail(message: str, post: Optional[int] = None) -> None:
        raise ThreadFormatError(where, message, thread_id, post)

    if posts is None:
        fail("the thread has no 'posts'")
    if not isinstance(posts, list):
        fail(f"'posts' must be a list of post objects, got {type_name(posts)}")
    if not posts:
        fail("'posts' is empty")

    labelled: Optional[bool] = None  # as post 1 is
    for t, post in enumerate(posts, start=1):
        if not isinstance(post, dict):
            fail(f"a post must be a JSON object, got {type_name(post)}", t)
        for key in ("title", "text"):
            if key not in post:
                fail(f"missing '{key}' (an empty string is allowed)", t)
            if not isinstance(post[key], str):
                fail(f"'{key}' must be a string, got {type_name(post[key])}", t)
        author = post.get("author")
        if author is not None and not isinstance(author, str):
            fail(f"'author' must be a string, got {type_name(author)}", t)
        initiator = post.get("initiator")
        if initiator is not None and not isinstance(initiator, bool):
            fail(f"'initiator' must be true or false, got {initiator!r}", t)

        links = post.get("links")
        acts = post.get("dialogue_acts")
        if (links is None) != (acts is None):
            present, absent = ("links", "dialogue_acts") if acts is None else ("dialogue_acts", "links")
            fail(f"has '{present}' but no '{absent}'", t)
        has_labels = links is not None
        if labelled is None:
            labelled = has_labels
        elif has_labels != labelled:
            state = "is labelled" if labelled else "is not labelled"
            own = "has" if has_labels else "has no"
            fail(
                f"{own} 'links'/'dialogue_acts' but post 1 {state}; a thread is labelled in every post or in none",
                t,
            )
        if has_labels:
            if not isinstance(links, list) or not all(is_int(link) for link in links):
                fail(f"'links' must be a list of integers, got {links!r}", t)
            if not links:
                fail("'links' is empty; the first post links to 0 (the thread head)", t)
            for link in links:
                if not 0 <= link < t:
                    fail(f"link {link} is out of range: post {t} may link to 0 (head) .. {t - 1}", t)
            if len(set(links)) != len(links):
                fail(f"duplicate link in {links}", t)
            if not isinstance(acts, list) or not all(isinstance(act, str) and act for act in acts):
                fail(f"'dialogue_acts' must be a list of non-empty strings, got {acts!r}", t)
            if len(acts) != len(links):
                fail(f"{len(links)} links but {len(acts)} dialogue acts (one dialogue act per link)", t)

    first_author = posts[0].get("author")
    result = []
    for t, post in enumerate(posts, start=1):
        initiator = post.get("initiator")
        if initiator is None:
            if first_author is None:
                fail("no 'initiator', and post 1 has no 'author' to derive it from", t)
            if post.get("author") is None:
                fail("no 'initiator' and no 'author' to derive it from", t)
            initiator = post["author"] == first_author
        labels = (None, None) if post.get("links") is None else (list(post["links"]), list(post["dialogue_acts"]))
        result.append(ForumPost(post["title"], post["text"], post.get("author"), initiator, *labels))
    return result


def punctuation_counts(title: str, text: str) -> Tuple[int, int, int]:
    """`(question marks, exclamation marks, URLs)` in the title and text of a post, "?" and "!" outside URLs."""
    combined = f"{title}\n{text}"
    urls = URL_PATTERN.findall(combined)
    rest = URL_PATTERN.sub(" ", combined)
    return rest.count("?"), rest.count("!"), len(urls)


def most_recent_link(links: List[int], dialogue_acts: List[str]) -> Tuple[int, str]:
    """The latest post a post links to (the largest index) and the dialogue act of that link."""
    position = max(range(len(links)), key=lambda i: links[i])
    return links[position], dialogue_acts[position]


@DatasetReader.register("thread_discourse")
@DatasetReader.register("forum_threads")  # the earlier name: archives trained under it still load
class ThreadDiscourseReader(DatasetReader):
    """
    Reads forum threads annotated with links and dialogue acts, for thread discourse structure
    prediction (Liu, Baldwin and Cohn, 2017, "Capturing Long-range Contextual Dependencies with
    Memory-enhanced Conditional Random Fields", section 4; the task and labels of Kim, Wang and
    Baldwin, 2010, on CNET forum threads).  Each post of a thread responds to one or more earlier
    posts, or to a virtual head (0) for the first post, and each such link has a dialogue act.

    Registered as a `DatasetReader` with name "thread_discourse".

    The CNET data is not distributed with nerzoo, so the reader defines its own JSON-lines format:
    one thread per line (blank lines are skipped), UTF-8:

        {"thread_id": "t17", "posts": [
          {"title": "...", "text": "...", "author": "alice", "initiator": true,
           "links": [0], "dialogue_acts": ["Question-Question"]},
          {"title": "Re: ...", "text": "...", "author": "bob",
           "links": [1], "dialogue_acts": ["Answer-Answer"]}]}

    (on one line in the file).  `thread_id` (a string) is optional and defaults to
    `"<file name>:<line>"`.  Posts are in chronological order; in each post:

    - `title`, `text` : strings, required, may be empty;
    - `author` : string, optional;
    - `initiator` : `true`/`false`, optional: whether the author started the thread.  When absent it
      is derived as `author == author of post 1` (then both authors are required);
    - `links` : for post `t` (1-based), a non-empty list of distinct integers in `0 .. t-1`
      (0 = the virtual head), the posts it responds to;
    - `dialogue_acts` : one label per link, aligned with `links` (e.g. the Kim et al. 2010 set in
      `CNET_DIALOGUE_ACTS`; any non-empty strings are accepted).

    `links` and `dialogue_acts` are absent (or `null`) in every post of an unlabelled thread (input
    for prediction) and present in every post of a labelled one.  Other keys are ignored.  The first
    problem in a file raises `ThreadFormatError` (a `ConfigurationError`) with a message
    `"path:line: thread <id>, post <t>: ..."`.

    Each thread is an instance with, for a thread of P posts,

    - `titles`, `texts` : `ListField[TextField]`, one tokenised title / text per post (truncated to
      `max_title_tokens` / `max_text_tokens`; empty ones are the single token `EMPTY_POST_TOKEN`,
      "@@EMPTY@@").  Batched they are `(batch, posts, words)` tensors;
    - `structural_features` : float `(P, 2)` tensor: `[initiator (0/1), position t / P]`;
    - `punctuation_features` : float `(P, 3)` tensor: the numbers of "?", "!" (outside URLs) and
      URLs in title and text;
    - `tags` (labelled threads) : `SequenceLabelField` over `titles`, in `label_namespace`: the
      dialogue act of each post's most recent link (the largest link index).  Following Wang (2014)
      and the ME-CRF paper, training uses only that link of multi-headed posts;
    - `links` (labelled threads) : long `(P,)` tensor, the target of that most recent link (0 =
      head), padded with -1 in batches;
    - `metadata` : `thread_id`, `num_posts`, `words` (a short readable string per post: its title,
      or the first words of its text), `sentence_spans` (`[(0, P)]`), `source` (`path:line`, `None`
      for `text_to_instance` input), and for labelled threads `gold_links` and
      `gold_dialogue_acts` (all links of every post and their dialogue acts, in file order), for
      evaluation over the full set of links.

    # Parameters

    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
        Used for both titles and texts.
    tokenizer : `Tokenizer`, optional (default = `SpacyTokenizer(language="blank:en", pos_tags=False)`)
        Splits titles and texts into words.  The default is spaCy's rule-based English tokenizer
        without a trained pipeline, so it needs no model download.  Whitespace-only tokens are
        dropped.
    max_title_tokens : `int`, optional (default = `30`)
    max_text_tokens : `int`, optional (default = `200`)
        Titles and texts are cut to this many tokens.
    label_namespace : `str`, optional (default = `"labels"`)
        Vocabulary namespace of the dialogue acts in `tags`.
    """

    def __init__(
        self,
        token_indexers: Optional[Dict[str, TokenIndexer]] = None,
        tokenizer: Optional[Tokenizer] = None,
        max_title_tokens: int = 30,
        max_text_tokens: int = 200,
        label_namespace: str = "labels",
        **kwargs,
    ) -> None:
        super().__init__(manual_distributed_sharding=True, manual_multiprocess_sharding=True, **kwargs)
        if max_title_tokens < 1 or max_text_tokens < 1:
            raise ConfigurationError("max_title_tokens and max_text_tokens must be at least 1")
        self._token_indexers = token_indexers or {"tokens": SingleIdTokenIndexer()}
        self._tokenizer = tokenizer or SpacyTokenizer(language="blank:en", pos_tags=False)
        self.max_title_tokens = max_title_tokens
        self.max_text_tokens = max_text_tokens
        self.label_namespace = label_namespace

    def _read(self, file_path: str) -> Iterable[Instance]:
        name = str(file_path)
        path = cached_path(file_path)
        lines = numbered_lines(
            path,
            lambda line, message: ThreadFormatError(name if line is None else f"{name}:{line}", message),
            "the file holds no threads",
        )
        for line_number, line in self.shard_iterable(lines):
            where = f"{name}:{line_number}"
            thread, thread_id = json_object(line, where, ThreadFormatError, "'posts'", "thread_id")
            if thread_id is None:
                thread_id = f"{os.path.basename(name)}:{line_number}"
            yield self.text_to_instance(thread.get("posts"), thread_id, {"source": where})

    def text_to_instance(  # type: ignore
        self,
        posts: List[Dict[str, Any]],
        thread_id: Optional[str] = None,
        metadata: Optional[Dict[str, Any]] = None,
    ) -> Instance:
        """
        Builds the instance of one thread from its `posts`, dictionaries as in the file format
        (labelled or not).  Predictors call it with the `posts` of a parsed JSON thread.  Entries of
        `metadata` are added to (or override) the instance metadata; its `source` (`path:line`), when
        given, prefixes validation errors.
        """
        extra = dict(metadata or {})
        source = extra.get("source")
        checked = validate_thread_posts(posts, source or "<input>", thread_id)
        num_posts = len(checked)

        titles = ListField([self._text_field(post.title, self.max_title_tokens) for post in checked])
        texts = ListField([self._text_field(post.text, self.max_text_tokens) for post in checked])
        structural = [[float(post.initiator), t / num_posts] for t, post in enumerate(checked, start=1)]
        punctuation = [list(map(float, punctuation_counts(post.title, post.text))) for post in checked]
        fields: Dict[str, Field] = {
            "titles": titles,
            "texts": texts,
            "structural_features": TensorField(torch.tensor(structural, dtype=torch.float32)),
            "punctuation_features": TensorField(torch.tensor(punctuation, dtype=torch.float32)),
        }
        full_metadata: Dict[str, Any] = {
            "thread_id": thread_id,
            "num_posts": num_posts,
            "words": [self._preview(post) for post in checked],
            "sentence_spans": [(0, num_posts)],
            "source": source,
        }
        if checked[0].links is not None:
            recent = [most_recent_link(post.links, post.dialogue_acts) for post in checked]  # type: ignore
            fields["tags"] = SequenceLabelField([act for _, act in recent], titles, self.label_namespace)
            fields["links"] = TensorField(
                torch.tensor([link for link, _ in recent], dtype=torch.long), padding_value=LINK_PADDING
            )
            full_metadata["gold_links"] = [post.links for post in checked]
            full_metadata["gold_dialogue_acts"] = [post.dialogue_acts for post in checked]
        full_metadata.update(extra)
        fields["metadata"] = MetadataField(full_metadata)
        return Instance(fields)

    def _text_field(self, text: str, max_tokens: int) -> TextField:
        tokens = [token for token in self._tokenizer.tokenize(text) if token.text.strip()]
        return TextField(tokens[:max_tokens] or [Token(EMPTY_POST_TOKEN)])

    @staticmethod
    def _preview(post: ForumPost) -> str:
        title = " ".join(post.title.split())
        if title:
            return title
        words = post.text.split()
        if not words:
            return EMPTY_POST_TOKEN
        return " ".join(words[:_PREVIEW_WORDS]) + (" ..." if len(words) > _PREVIEW_WORDS else "")

    def apply_token_indexers(self, instance: Instance) -> None:
        for name in ("titles", "texts"):
            for text_field in instance[name].field_list:  # type: ignore
                text_field.token_indexers = self._token_indexers  # type: ignore
