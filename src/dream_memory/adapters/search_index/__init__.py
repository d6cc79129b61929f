"""The search index (what ``dream search --no-cache`` does without): a SQLite FTS5 word index of
a store's searchable files, kept under the user's cache folder (never in the store), so a search
on a large store costs a few index look-ups instead of reading every file.

Why a word index answers substring search exactly: a plain query term never holds ASCII whitespace
(``parse_query`` splits on it), so each occurrence of a term in a folded text lies inside one
whitespace-delimited token. The occurrences of a term in a file are exactly
``sum(token.count(term) * occurrences of the token in the file)`` over the tokens that hold the
term. The index keeps the folded texts tokenised on ASCII whitespace only (FTS5's ``ascii``
tokenizer with every other ASCII character declared a token character, so its tokens are
``bytes.split()``'s) plus the vocabulary; a query scans the vocabulary for tokens holding the term
and asks FTS5 how often each occurs per file. A file is indexed as pieces cut at whitespace
(``write.pieces``: a smaller index), so no token is cut and its count is the sum over the
pieces. A "quoted phrase" spans tokens: the index narrows it to the files holding each of its
words, and the caller reads those files to count it.

Trust rule: a file is answered from the index only while its size, mtime, ctime and inode are the
recorded ones and it had not changed within 2 s before it was indexed ("racy git"); anything else
is read from the store, and the files read are written back to the index in the same search, so
the index is refreshed from changed files only. Excluded entities never reach it (and are purged,
deleted content overwritten, when a file becomes excluded). Any problem with the index (missing,
corrupt, locked, unwritable, an SQLite without FTS5) falls back to reading the store: the index
can make search faster, never different. An index whose files are not as dream-memory last
recorded them (``mark``) is built again before it answers, since damaged postings can decode as
a valid, shorter list that FTS5's integrity check passes.

The package, along its seams: ``files`` (the recorded values and the packed file table), ``match``
(the read side of an open index), ``write`` (building and updating), ``location`` (where an index
lives, opening it), ``mark`` (the record of its files as last written) and ``facade``
(``open_search_cache``: the one entry the read side uses). The names below are re-exported for the
callers of the former single module.
"""

from dream_memory.adapters.search_index.facade import IndexCache, NoSearchCache, open_search_cache
from dream_memory.adapters.search_index.files import (
    SCHEMA_VERSION,
    FileTable,
    IndexedText,
    IndexRows,
    StatKey,
    stat_key,
)
from dream_memory.adapters.search_index.location import SearchIndex
from dream_memory.adapters.search_index.match import (
    MAX_TOKENS_PER_TERM,
    RACY_NS,
    OpenIndex,
    TermMatches,
    tokens_holding,
)
from dream_memory.adapters.search_index.write import MAX_TOKEN_BYTES, VOCAB_RECOUNT_SHARE

__all__ = [
    "MAX_TOKENS_PER_TERM",
    "MAX_TOKEN_BYTES",
    "RACY_NS",
    "SCHEMA_VERSION",
    "VOCAB_RECOUNT_SHARE",
    "FileTable",
    "IndexCache",
    "IndexRows",
    "IndexedText",
    "NoSearchCache",
    "OpenIndex",
    "SearchIndex",
    "StatKey",
    "TermMatches",
    "open_search_cache",
    "stat_key",
    "tokens_holding",
]
