"""Generated long two-person chats of the LoCoMo kind, for bench/facts.py.

A conversation runs over many dated sessions (the first turn of each opens with a stamp line,
``[8 May 2023, 1:56 pm]``); each turn is ``Name: text``. Amid small talk the two speakers state
facts about themselves and the people around them: family, pets, friends, jobs, where they live
and grew up, hobbies, favourites, trips ahead with their dates, things they did (asked about with
the session's date as the answer). Some facts change later (a move, a new job, a new favourite):
the newest value is the gold. Every gold answer appears verbatim in the transcript.

Each kind of fact has two sets of phrasings: ``dev`` and ``held``, the held-out one (the default)
that the benchmark measures with and the summariser was not written against. Deterministic:
a seed gives the same conversation on every machine (``random.Random`` is stable across runs).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


FIRST = _words(
    "Caroline Melanie Priya Jon Gina Tomas Aiko Deborah Evan Nate Joanna Maria Audrey Andrew "
    "James John Calvin Dave Sam Lena Rosa Hugo Marta Omar Nadia Felix Iris Leo Clara Ravi"
)
KIN_NAMES = _words(
    "Sophie Ethan Lily Marcus Hannah Owen Zoe Daniel Ava Lucas Mia Noah Grace Isaac Ruby Theo "
    "Nora Caleb Elise Jasper Maya Simon Talia Victor Wendy Miles Paige Reid Stella Quinn"
)
PET_NAMES = _words(
    "Biscuit Pepper Luna Mochi Oscar Waffles Juniper Bean Ziggy Noodle Clementine Pickles "
    "Mabel Rocket Toffee Basil Nugget Olive Pretzel Sprout"
)
PETS = ("dog", "cat", "puppy", "kitten", "parrot", "rabbit", "hamster", "tortoise")
CITIES = _words(
    "Boston Denver Austin Portland Seattle Chicago Lisbon Toronto Melbourne Dublin Tucson "
    "Asheville Savannah Madison Boulder Halifax Edinburgh Pittsburgh Raleigh Sacramento"
)
PLACES = _words(
    "Lisbon Kyoto Iceland Barcelona Yosemite Vancouver Crete Marrakech Banff Prague Oaxaca "
    "Copenhagen Hanoi Sicily Patagonia Vienna"
)
JOBS = (
    "nurse",
    "graphic designer",
    "school counselor",
    "software engineer",
    "pastry chef",
    "physical therapist",
    "librarian",
    "electrician",
    "veterinary technician",
    "high school teacher",
    "paralegal",
    "social worker",
    "architect",
    "dental hygienist",
)
EMPLOYERS = (
    "Brightwater Clinic",
    "Halcyon Labs",
    "Maple Street Bakery",
    "Northwind Logistics",
    "Riverside Elementary",
    "Copperleaf Studio",
    "Greenfield Hospital",
    "Atlas Robotics",
    "Bluebird Books",
    "Summit Credit Union",
)
HOBBIES = (
    "pottery",
    "rock climbing",
    "salsa dancing",
    "birdwatching",
    "woodworking",
    "watercolor painting",
    "trail running",
    "knitting",
    "beekeeping",
    "chess",
    "sourdough baking",
    "kayaking",
)
BANDS = (
    "Fleetwood Mac",
    "Radiohead",
    "Khruangbin",
    "Arcade Fire",
    "Bon Iver",
    "Vampire Weekend",
    "The National",
    "Phoebe Bridgers",
    "Tame Impala",
    "Florence and the Machine",
)
BOOKS = (
    "Pachinko",
    "The Overstory",
    "Circe",
    "Educated",
    "Station Eleven",
    "The Remains of the Day",
    "Piranesi",
    "Middlemarch",
    "Beloved",
    "The Goldfinch",
)
FOODS = ("ramen", "tacos al pastor", "pho", "shakshuka", "pierogi", "paella", "bibimbap", "gumbo")
EVENTS = (
    ("ran a charity 5k", "run a charity 5k"),
    ("went to a pottery workshop", "go to a pottery workshop"),
    ("volunteered at the animal shelter", "volunteer at the animal shelter"),
    ("saw a Coldplay concert", "see a Coldplay concert"),
    ("went camping at Lake Tahoe", "go camping at Lake Tahoe"),
    ("gave a talk at the library", "give a talk at the library"),
    ("attended an LGBTQ support group", "attend an LGBTQ support group"),
    ("painted a mural at the community center", "paint a mural at the community center"),
    ("hosted a book club", "host a book club"),
    ("went to a cooking class", "go to a cooking class"),
)
MONTHS = _words(
    "January February March April May June July August September October November December"
)
RELATIVES = ("sister", "brother", "daughter", "son", "cousin", "niece", "nephew")
PARTNERS = ("husband", "wife", "partner", "boyfriend", "girlfriend", "fiancé")

# Phrasings: {field} slots; "dev" and "held" sets per kind.
PHRASES: dict[str, dict[str, tuple[str, ...]]] = {
    "pet": {
        "dev": (
            "We adopted a {pet} last month, the name is {name}.",
            "My {pet} {name} has been chewing everything in sight lol.",
            "Did I tell you about {name}? My {pet}, the sweetest thing.",
        ),
        "held": (
            "Oh, and {name}, my {pet}, finally learned to sit on command!",
            "I got a {pet}! I named it {name} and it already runs the house.",
            "{name} (that's my {pet}) knocked a whole plant off the shelf this morning.",
            "Meet {name}, our new {pet}. Total chaos, total love.",
        ),
    },
    "relative": {
        "dev": (
            "My {rel} {name} is coming to stay with us for a bit.",
            "I had lunch with my {rel}, {name}, yesterday.",
        ),
        "held": (
            "{name}, my {rel}, just started college and calls me every night haha.",
            "I'm so proud of my {rel} {name}, who just got into the choir!",
            "You'd like {name}. That's my {rel}, the funny one in the family.",
            "Spent the whole Sunday helping my {rel} {name} paint the fence.",
        ),
    },
    "partner": {
        "dev": (
            "My {rel} {name} surprised me with dinner last night.",
            "{name} and I have been together six years now, can you believe it?",
        ),
        "held": (
            "My {rel}, {name}, keeps telling me to slow down a bit.",
            "Honestly {name} is the best {rel} anyone could ask for.",
            "{name}, my {rel}, planned the whole weekend, I just showed up.",
        ),
    },
    "friend": {
        "dev": (
            "My friend {name} just moved to {city}, I'm going to miss them.",
            "Remember {name}? My old roommate? Lives in {city} now.",
        ),
        "held": (
            "My best friend {name} packed up and moved to {city} last week.",
            "{name}, a friend from college, relocated to {city} for work.",
            "I talked to my buddy {name} today, all settled in {city} now and loves it.",
        ),
    },
    "job": {
        "dev": (
            "I work as a {job} at {employer}, so the hours are all over the place.",
            "Being a {job} at {employer} is exhausting but I love it.",
        ),
        "held": (
            "Work is good! I'm a {job} over at {employer} now.",
            "So I started a new job, I'm a {job} at {employer}!",
            "I finally took the offer, {job} at {employer}, starting Monday.",
            "After years of searching I landed a spot as a {job} with {employer}.",
        ),
    },
    "home": {
        "dev": (
            "We moved to {city} a while ago and I'm still learning the streets.",
            "Living in {city} has been a big change for us.",
        ),
        "held": (
            "We finally did it, we moved to {city}! Boxes everywhere.",
            "Greetings from our new place in {city}, still unpacking haha.",
            "Life in {city} is treating us well so far.",
            "The move to {city} went smoother than I expected.",
        ),
    },
    "hometown": {
        "dev": ("I grew up in {city}, so the cold doesn't scare me.",),
        "held": (
            "Back in {city}, where I grew up, we had a lake right behind the house.",
            "I'm originally from {city}, so this weather is nothing to me.",
            "Growing up in {city} taught me to love small diners.",
        ),
    },
    "hobby": {
        "dev": ("I've gotten really into {hobby} lately.", "{hobby} is my new obsession."),
        "held": (
            "These days I spend every free evening on {hobby}, it calms me down.",
            "I signed up for a {hobby} class and I'm hooked.",
            "My weekends are basically all {hobby} now, no regrets.",
        ),
    },
    "band": {
        "dev": ("My favorite band is {band}, always has been.",),
        "held": (
            "I've had {band} on repeat all week, they're my favorite.",
            "Nothing beats {band} for me, I've seen them live three times.",
            "If I could only listen to one band forever it would be {band}.",
        ),
    },
    "book": {
        "dev": ("My favorite book is {book}, I reread it every year.",),
        "held": (
            "I just finished rereading {book}, still my all-time favorite.",
            "Have you read {book}? It's the book I'd save in a fire.",
            "I keep recommending {book} to everyone, it's my favorite novel.",
        ),
    },
    "food": {
        "dev": ("I could eat {food} every single day.",),
        "held": (
            "My comfort food is {food}, no contest.",
            "We had {food} for dinner again, I never get tired of it.",
            "If it's my birthday, it's {food}, that's the rule.",
        ),
    },
    "trip": {
        "dev": ("We're going to {place} on {date}, I can't wait!",),
        "held": (
            "Big news: we booked a trip to {place}, leaving {date}!",
            "I'm flying out to {place} on {date} for a week.",
            "{place} trip is happening! We leave on {date}.",
        ),
    },
    "event": {
        "dev": ("Yesterday I {did}, it was amazing.",),
        "held": (
            "I {did} this weekend and honestly it was the highlight of my month.",
            "Guess what, I {did} yesterday!",
            "So last night I {did}. Still buzzing.",
            "I finally {did}, I'd been putting it off forever.",
        ),
    },
}

# Later mentions of a fact's value, by either speaker ({v}: the value).
MENTIONS: dict[str, tuple[str, ...]] = {
    "pet": ("How is {v} doing?", "Give {v} a scratch behind the ears from me!", "{v} is so cute."),
    "relative": ("How's {v} doing these days?", "Tell {v} I said hi!", "{v} sounds like a gem."),
    "partner": ("How's {v}?", "{v} is lucky to have you.", "Say hi to {v} for me!"),
    "friend": ("Is {v} nice this time of year?", "I've always wanted to visit {v}."),
    "home": ("How's the weather in {v}?", "I keep hearing good things about {v}."),
    "hometown": ("Do you ever go back to {v}?",),
    "hobby": ("How's the {v} going?", "I should try {v} one of these days."),
    "band": ("I listened to some {v} after we talked, so good.",),
    "book": ("I started {v} because of you!",),
    "food": ("Now I'm craving {v}, thanks a lot haha.",),
    "job": ("How are things at {v}?",),
}
SMALL_TALK = (
    "How have you been?",
    "It's been such a long week, I'm so ready for the weekend.",
    "That sounds amazing!",
    "Aw, I love that for you.",
    "I totally get that.",
    "Work has been crazy lately, but I'm hanging in there.",
    "Haha, that's so you.",
    "The weather has been so gloomy here, I miss the sun.",
    "I made a huge pot of soup yesterday, it lasted three days.",
    "Honestly, I needed to hear that today.",
    "Anyway, enough about me, what's new with you?",
    "That's such a good point, I never thought of it that way.",
    "I've been trying to get more sleep but it's not going great.",
    "We should catch up properly soon, maybe over coffee.",
    "Oh no, I hope everything is okay!",
    "You always know how to cheer me up.",
    "I've been binge-watching a baking show, it's my guilty pleasure.",
    "That's wild, I had no idea.",
    "I'm trying to be better about taking breaks during the day.",
    "It feels like this year is flying by.",
    "Yes! Exactly how I feel.",
    "Sending you a big hug.",
    "I keep meaning to clean out my closet but never get to it.",
    "My phone died in the middle of the day, total disaster.",
    "I'm so glad you reached out, it's been too long.",
    "Sounds like you've got a lot on your plate.",
    "I went for a long walk this morning, it really cleared my head.",
    "Take care of yourself, okay?",
    "I think change is hard but it's usually worth it.",
    "That made me laugh out loud, thank you.",
    "I've been thinking a lot about what really matters to me.",
    "It's the little things that make a day good, you know?",
    "I tried a new recipe and it was a complete flop haha.",
    "Traffic this morning was unbelievable.",
    "I'm proud of you, seriously.",
    "Let me know if there's anything I can do.",
    "That's so thoughtful of you.",
    "I need to stop buying plants, I'm running out of windowsills.",
    "Fingers crossed it all works out!",
    "I've been journaling again and it helps a lot.",
    "You're right, I should give myself more credit.",
    "Ugh, Mondays.",
    "It was nice to just sit outside and do nothing for once.",
    "I can't believe how fast the kids are growing.",
    "Wow, what a story.",
    "I hope you get some rest this weekend.",
    "I'm definitely going to try that.",
    "I feel like we're always on the same wavelength.",
    "That's a really brave thing to do.",
    "We watched the sunset from the porch, it was gorgeous.",
)
OPENERS = ("", "", "", "Honestly, ", "Haha ", "Oh man, ", "Ugh, ", "Aw, ", "Yeah, ", "Lol ")
ACTS = (
    "reorganized the pantry",
    "cleaned the whole kitchen",
    "fixed the wobbly chair",
    "binged an entire season of a crime show",
    "baked way too many cookies",
    "finally did my taxes",
    "repotted all the succulents",
    "took a super long nap",
    "walked to the farmers market",
    "tried a new coffee place downtown",
    "cleared out the garage",
    "stayed up way too late reading",
    "made pancakes for everyone",
    "went through old photo albums",
    "rearranged the living room",
    "did a big grocery run",
    "caught up on laundry",
    "watched the game with the neighbors",
    "sorted out the closet",
    "called my grandma",
)
WHENS = ("yesterday", "last night", "this morning", "on Saturday", "over the weekend", "today")
FEELS = (
    "so satisfying",
    "not my best idea",
    "it felt great",
    "no regrets",
    "totally worth it",
    "I'm exhausted now",
    "it was kind of relaxing",
    "long overdue",
)
TIMES = ("9:12 am", "10:30 am", "1:56 pm", "3:04 pm", "5:47 pm", "7:20 pm", "8:15 pm")


def _small_talk(rng: random.Random) -> str:
    """A sentence of small talk: a stock line or a chore done, with an opener sometimes."""
    if rng.random() < 0.4:
        line = f"I {rng.choice(ACTS)} {rng.choice(WHENS)}, {rng.choice(FEELS)}."
    else:
        line = rng.choice(SMALL_TALK)
    opener = rng.choice(OPENERS)
    if opener and not line.startswith(("I ", "I'")):
        line = line[0].lower() + line[1:]
    return opener + line


@dataclass(frozen=True)
class Turn:
    """One chat turn: its speaker and what they said (the session stamp, when it opens one)."""

    speaker: str
    text: str
    stamp: str = ""

    @property
    def line(self) -> str:
        head = f"[{self.stamp}]\n" if self.stamp else ""
        return f"{head}{self.speaker}: {self.text}"


@dataclass(frozen=True)
class Question:
    """A question about the conversation and its gold answer (verbatim in the transcript)."""

    text: str
    answer: str
    kind: str


@dataclass
class Conversation:
    """Two speakers' sessions of turns and the questions about them."""

    speakers: tuple[str, str]
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    @property
    def transcript(self) -> str:
        return "\n".join(t.line for t in self.turns)


class _Fresh(random.Random):
    """A seeded ``Random`` whose ``pick`` gives each value once per conversation (while the pool
    lasts), so one answer never stands for two facts."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.used: set[str] = set()

    def pick(self, pool: tuple[str, ...] | list[str]) -> str:
        left = [v for v in pool if v not in self.used] or list(pool)
        value = self.choice(left)
        self.used.add(value)
        return value


@dataclass
class _Said:
    """A fact to state: who, in which session, the sentence, and the question it answers."""

    speaker: str
    session: int
    sentence: str
    question: Question | None


def conversation(seed: int, sessions: int = 24, phrasing: str = "held") -> Conversation:
    """A seeded conversation of ``sessions`` sessions, facts in ``phrasing`` ("held" or "dev")."""
    rng = _Fresh(seed)
    a, b = rng.sample(FIRST, 2)
    said: list[_Said] = []
    for speaker in (a, b):
        said += _facts(rng, speaker, sessions, phrasing)
    said += _mentions(rng, (a, b), said, sessions)
    dates = _session_dates(rng, sessions)
    convo = Conversation((a, b))
    for session in range(sessions):
        stated = [s for s in said if s.session == session]
        convo.turns += _session(rng, (a, b), stated, dates[session])
    golds: dict[str, Question] = {}
    for s in sorted(said, key=lambda s: s.session):
        if s.question is not None:
            answer = dates[s.session][0] if s.question.answer == "@date" else s.question.answer
            golds[s.question.text] = Question(s.question.text, answer, s.question.kind)
    convo.questions = list(golds.values())
    return convo


def _session_dates(rng: random.Random, sessions: int) -> list[tuple[str, str]]:
    """Each session's date (``8 May 2023``) and time, a few days to weeks apart."""
    day, month, year = rng.randint(1, 20), rng.randint(0, 11), 2023
    out = []
    for _ in range(sessions):
        out.append((f"{day} {MONTHS[month]} {year}", rng.choice(TIMES)))
        day += rng.randint(3, 16)
        while day > 28:
            day, month = day - 28, month + 1
            if month == 12:
                month, year = 0, year + 1
    return out


def _session(
    rng: random.Random, speakers: tuple[str, str], stated: list[_Said], date: tuple[str, str]
) -> list[Turn]:
    """One session: small talk with the facts stated by their speakers, in turn order."""
    count = max(rng.randint(14, 22), len(stated) + 2)
    placed = dict(zip(sorted(rng.sample(range(1, count), len(stated))), stated, strict=True))
    turns: list[Turn] = []
    opener = rng.choice(speakers)
    for n in range(count):
        speaker = speakers[(speakers.index(opener) + n) % 2]
        sentences = [_small_talk(rng) for _ in range(rng.randint(1, 3))]
        fact = placed.get(n)
        if fact is not None:
            speaker = fact.speaker
            sentences.insert(rng.randint(0, len(sentences)), fact.sentence)
        stamp = f"{date[0]}, {date[1]}" if n == 0 else ""
        if n == 0:
            sentences.insert(0, rng.choice(("Hey!", "Hi!", "Hey, long time no talk!", "Hello!")))
        turns.append(Turn(speaker, " ".join(sentences), stamp))
    return turns


def _phrase(rng: random.Random, kind: str, phrasing: str, **values: str) -> str:
    return rng.choice(PHRASES[kind][phrasing]).format(**values)


def _facts(rng: _Fresh, who: str, sessions: int, phrasing: str) -> list[_Said]:
    """What ``who`` says of themselves and their people over the sessions, with questions."""
    out: list[_Said] = []

    def say(kind: str, question: str, answer: str, **values: str) -> None:
        session = rng.randrange(0, sessions)
        q = Question(question, answer, kind) if question else None
        out.append(_Said(who, session, _phrase(rng, kind, phrasing, **values), q))

    pet, pet_name = rng.choice(PETS), rng.pick(PET_NAMES)
    say("pet", f"What is the name of {who}'s {pet}?", pet_name, pet=pet, name=pet_name)
    for rel in rng.sample(RELATIVES, 3):
        name = rng.pick(KIN_NAMES)
        say("relative", f"What is the name of {who}'s {rel}?", name, rel=rel, name=name)
    partner, partner_name = rng.choice(PARTNERS), rng.pick(KIN_NAMES)
    say(
        "partner",
        f"What is {who}'s {partner}'s name?",
        partner_name,
        rel=partner,
        name=partner_name,
    )
    friend, friend_city = rng.pick(KIN_NAMES), rng.pick(CITIES)
    say(
        "friend",
        f"Where did {who}'s friend {friend} move to?",
        friend_city,
        name=friend,
        city=friend_city,
    )
    _updated(rng, who, sessions, phrasing, out)
    hometown = rng.pick(CITIES)
    say("hometown", f"Where did {who} grow up?", hometown, city=hometown)
    for kind, pool in (("band", BANDS), ("book", BOOKS), ("food", FOODS)):
        value = rng.pick(pool)
        say(kind, f"What is {who}'s favorite {kind}?", value, **{kind: value})
    hobby = rng.pick(HOBBIES)
    say("hobby", f"What hobby has {who} taken up?", hobby, hobby=hobby)
    place = rng.pick(PLACES)
    date = f"{rng.choice(MONTHS)} {rng.randint(2, 28)}"
    say("trip", f"When is {who} leaving for {place}?", date, place=place, date=date)
    for did, do in rng.sample(EVENTS, 4):
        say("event", f"When did {who} {do}?", "@date", did=did)
    return out


def _updated(rng: _Fresh, who: str, sessions: int, phrasing: str, out: list[_Said]) -> None:
    """Facts stated twice, the later value the gold: where ``who`` lives, their job."""
    first, second = sorted(rng.sample(range(sessions), 2))
    old, new = rng.pick(CITIES), rng.pick(CITIES)
    out.append(_Said(who, first, _phrase(rng, "home", phrasing, city=old), None))
    question = Question(f"Which city does {who} live in now?", new, "home")
    out.append(_Said(who, second, _phrase(rng, "home", phrasing, city=new), question))
    first, second = sorted(rng.sample(range(sessions), 2))
    (job1, job2), (emp1, emp2) = rng.sample(JOBS, 2), (rng.pick(EMPLOYERS), rng.pick(EMPLOYERS))
    out.append(_Said(who, first, _phrase(rng, "job", phrasing, job=job1, employer=emp1), None))
    question = Question(f"Where does {who} work now?", emp2, "job")
    out.append(_Said(who, second, _phrase(rng, "job", phrasing, job=job2, employer=emp2), question))


def _mentions(
    rng: random.Random, speakers: tuple[str, str], said: list[_Said], sessions: int
) -> list[_Said]:
    """Later mentions of some facts' values (no questions of their own): a name, a city."""
    out = []
    for s in said:
        q = s.question
        if q is None or q.kind not in MENTIONS or s.session + 1 >= sessions:
            continue
        for _ in range(rng.choice((0, 1, 1, 2))):
            text = rng.choice(MENTIONS[q.kind]).format(v=q.answer)
            out.append(
                _Said(rng.choice(speakers), rng.randrange(s.session + 1, sessions), text, None)
            )
    return out
