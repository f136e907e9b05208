"""A chat between people as ledger entries: the facts the speakers state about themselves and
others, kept as short lines, small talk as notes (ranked last, dropped first).

A history is a chat when most of its texts open with a speaker's name and a colon (``Melanie:
...``; a bracketed stamp line may come first, ``[8 May 2023, 1:56 pm]``, and gives the date of
what follows). Each sentence of a turn is then one statement, said by its speaker:

- a fact when it states something (not a question) with a value, a name (a capitalised word
  not opening the sentence, nor a speaker's name), a number or a date, or a word of a person's
  life (family, pets, friends, work, home, favourites, plans) with a value or said of oneself;
  its line is ``Speaker: sentence``, with the session's date after a sentence telling of
  something done (yesterday, last night, this weekend, finally, ...): ``(8 May 2023)``;
- a note otherwise (greetings, feelings, questions, chores).

A fact about where a speaker lives or works (and not about a friend or a relative) has the slot
``chat:<speaker>:home`` or ``chat:<speaker>:work``: a later one replaces it, the newest value
wins. Word checks only: linear, deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from app.domain.messages import Message
from app.domain.summaries.entries import LINE_CHARS, Entry, make_entry
from app.domain.summaries.subjects import MONTHS, words


def _lexicon(text: str) -> frozenset[str]:
    return frozenset(text.split())


SPEAKER_WORDS = 2  # a speaker's name: at most this many capitalised words
SPEAKER_CHARS = 32
CHAT_SHARE = 2  # a chat: at least 1/CHAT_SHARE of the texts open with a speaker
MIN_TURNS = 4
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
FIRST_PERSON = _lexicon("i i'm i've i'd my we we're we've our us me")
LIFE = _lexicon(
    "sister brother mom mother dad father daughter son kids kid children wife husband "
    "partner boyfriend girlfriend fiancé fiance fiancée friend buddy roommate grandma "
    "grandpa grandmother grandfather aunt uncle cousin niece nephew baby family "
    "dog cat puppy kitten pet parrot rabbit hamster tortoise bird horse fish "
    "job work works working worked career office boss company hired offer position "
    "live lives living moved move moving house apartment city town neighborhood "
    "grew born hometown originally school college university degree studying class "
    "favorite favourite fav love loves hobby obsession hooked trip flight vacation "
    "visit visiting booked wedding birthday anniversary married engaged named called"
)
OTHERS = _lexicon(
    "sister brother mom mother dad father daughter son wife husband partner boyfriend "
    "girlfriend fiancé fiance fiancée friend buddy roommate grandma grandpa aunt uncle "
    "cousin niece nephew neighbor coworker colleague"
)
SLOTS = {
    **dict.fromkeys(_lexicon("live lives moved move moving relocated"), "home"),
    **dict.fromkeys(_lexicon("job work works working hired offer position employer"), "work"),
}
DONE = _lexicon("yesterday tonight today finally weekend")
DONE_PAIRS = frozenset(
    [("last", "night"), ("last", "week"), ("this", "morning"), ("last", "weekend")]
)
COMMON = _lexicon("I I'm I've I'd I'll Monday Tuesday Wednesday Thursday Friday Saturday Sunday OK")


@dataclass
class Chat:
    """The speakers of a chat and the date of the session being read."""

    speakers: frozenset[str]
    date: str = ""


def chat_of(messages: Sequence[Message], carried: Sequence[str] = ()) -> Chat | None:
    """The chat ``messages`` hold, or None when they are not one: at least ``MIN_TURNS`` turns
    of two speakers or more, counting ``carried`` (the lines of an earlier summary), and at
    least 1/``CHAT_SHARE`` of the messages' texts turns."""
    texts = [m.text for m in messages if m.text]
    found = [s for s in (split_turn(t)[1] for t in texts) if s]
    before = [s for s in (split_turn(line)[1] for line in carried) if s]
    speakers = frozenset(found + before)
    if len(found) + len(before) < MIN_TURNS or len(speakers) < 2:
        return None
    return Chat(speakers) if len(found) * CHAT_SHARE >= len(texts) else None


def split_turn(text: str) -> tuple[str, str, str]:
    """A turn's stamp (its bracketed first line, "" when none), speaker ("" when none), body."""
    stamp = ""
    head, sep, rest = text.partition("\n")
    if head.startswith("[") and head.rstrip().endswith("]") and sep:
        stamp, text = head.strip()[1:-1], rest
    name, colon, body = text.partition(": ")
    tokens = name.split()
    if not colon or not 0 < len(tokens) <= SPEAKER_WORDS or len(name) > SPEAKER_CHARS:
        return stamp, "", text
    if not all(_capitalised(t) for t in tokens):
        return stamp, "", text
    return stamp, name, body


def _capitalised(token: str) -> bool:
    """A word of a name: a capital, then lowercase letters (hyphens and apostrophes too)."""
    rest = token[1:].replace("-", "").replace("'", "")
    return token[:1].isupper() and rest.isalpha() and rest.islower()


def chat_entries(message: Message, seq: int | None, chat: Chat) -> Iterator[Entry]:
    """The entries of one turn of ``chat`` (a turn with no speaker gives none here)."""
    stamp, speaker, body = split_turn(message.text)
    if stamp:
        chat.date = stamp_date(stamp) or chat.date
    seqs = () if seq is None else (seq,)
    for line in body.splitlines():
        for sentence in _SENTENCE.split(" ".join(line.split())):
            entry = sentence_entry(sentence, speaker, chat, seqs)
            if entry is not None:
                yield entry


def stamp_date(stamp: str) -> str:
    """The date of a stamp (its part before a comma that holds a number), or ""."""
    for part in stamp.split(","):
        if any(c.isdigit() for c in part) and ":" not in part:
            return part.strip()
    return ""


def sentence_entry(sentence: str, speaker: str, chat: Chat, seqs: tuple[int, ...]) -> Entry | None:
    """The entry one sentence of ``speaker``'s makes: a fact, a note, or None when empty."""
    sentence = sentence.strip()[:LINE_CHARS]
    lower = words(sentence.replace("\u2019", "'"))
    if not lower:
        return None
    tokens = sentence.split()
    valued = _values(tokens, chat.speakers)
    life = sum(w in LIFE for w in lower) > 0
    mine = any(t.lower().strip(",.!?;:") in FIRST_PERSON for t in tokens)
    asked = sentence.endswith("?")
    text = f"{speaker}: {sentence}"
    if asked or not (valued or (life and mine)):
        return make_entry("note", text, seqs)
    slot = _slot(speaker, lower) if valued else None
    if chat.date and _done(lower):
        text, valued = f"{text} ({chat.date})", valued + 1
    return Entry("fact", text, seqs, "", slot, valued + int(life))


def _values(tokens: Sequence[str], speakers: frozenset[str]) -> int:
    """How many names, numbers and dates ``tokens`` carry (a sentence's first word is no name)."""
    found = 0
    for n, token in enumerate(tokens):
        core = token.strip(".,;:!?()\"'")
        if any(c.isdigit() for c in core):
            found += 1
        elif n and core[:1].isupper() and not {core, core[:-1]} & COMMON and core not in speakers:
            found += core.lower() not in MONTHS or n + 1 < len(tokens)
    return found


def _done(lower: Sequence[str]) -> bool:
    """A sentence telling of something done (yesterday, last night, finally, ...)."""
    return any(w in DONE for w in lower) or any((a, b) in DONE_PAIRS for a, b in pairwise(lower))


def _slot(speaker: str, lower: Sequence[str]) -> str | None:
    """Where ``speaker`` lives or works, when the sentence says so of them (no one else named)."""
    if any(w in OTHERS for w in lower):
        return None
    kind = next((SLOTS[w] for w in lower if w in SLOTS), None)
    return f"chat:{speaker}:{kind}" if kind else None


def read_back(entry: Entry) -> Entry:
    """A chat fact read back from a summary, its slot as it was made (no subject: chat facts
    replace one another by slot only)."""
    _, speaker, body = split_turn(entry.text)
    if entry.kind != "fact" or not speaker:
        return entry
    named = _values(body.split(), frozenset([speaker])) > 0
    slot = _slot(speaker, words(body)) if named else None
    return replace(entry, subject="", slot=slot)
