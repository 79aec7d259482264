"""Job ids: Flux Locally Unique IDs (FLUIDs) and their F58 spelling.

A FLUID packs [timestamp ms:40 | generator id:14 | sequence:10] into 64 bits,
so ids sort by submit time.  F58 is base58 with a "ƒ" prefix ("f" when the
locale cannot print it).  `parse()` accepts F58 (either prefix), decimal,
0x-hex, dotted hex ("0000.0004.b200.0000", the KVS form), mnemonic words and
emoji.

The words form is Flux's: the id's eight bytes in little-endian order, spelled
with the mnemonicode scheme (Oren Tirosh's word list, from the `mnemonicode`
package, imported only when words are asked for) as two groups of three words,
"academy-academy-academy--academy-academy-academy" for 0.

The emoji form is RFC 19's: the id in base 576, most significant digit first,
each digit one of the 576 emoji RFC 19 lists (Unicode 6.0 emoji, four UTF-8
bytes starting F0 9F, in CLDR order), digit 0 being U+1F603; so 0 is one emoji
and 2**64-1 is seven.  A string that starts with such an emoji decodes as one.
"""

from __future__ import annotations

import locale
import os
import re
import time

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_INDEX = {c: i for i, c in enumerate(_B58)}
_TS_BITS, _ID_BITS, _SEQ_BITS = 40, 14, 10
_PREFIXES = ("ƒ", "f")


class FluidGenerator:
    """Generates increasing FLUIDs; `timestamp_zero` anchors the 40-bit ms clock."""

    def __init__(self, gen_id: int = 0, epoch: float | None = None):
        if not 0 <= gen_id < (1 << _ID_BITS):
            raise ValueError("generator id out of range")
        self.gen_id = gen_id
        self.epoch = time.time() - 1.0 if epoch is None else epoch
        self._last_ts = -1
        self._seq = 0

    def after(self, fluid: int) -> None:
        """Every id generated from now on is larger than `fluid` (a restart's largest)."""
        ts, seq = fluid >> (_ID_BITS + _SEQ_BITS), fluid & ((1 << _SEQ_BITS) - 1)
        if ts > self._last_ts or (ts == self._last_ts and seq >= self._seq):
            self._last_ts, self._seq = ts, seq + 1

    def generate(self) -> int:
        while True:
            ts = int((time.time() - self.epoch) * 1000)
            ts = max(ts, self._last_ts)
            if ts > self._last_ts:
                self._last_ts, self._seq = ts, 0
            if self._seq < (1 << _SEQ_BITS):
                break
            # 1024 ids in this millisecond: move the clock on (bounded busy wait)
            self._last_ts += 1
            self._seq = 0
        fluid = (ts << (_ID_BITS + _SEQ_BITS)) | (self.gen_id << _SEQ_BITS) | self._seq
        self._seq += 1
        return fluid


def utf8_locale() -> bool:
    """True if the terminal can show "ƒ" (the F58 prefix)."""
    for var in ("LC_ALL", "LC_CTYPE", "LANG"):
        val = os.environ.get(var)
        if val:
            return "utf-8" in val.lower() or "utf8" in val.lower()
    return (locale.getpreferredencoding(False) or "").lower().replace("-", "") == "utf8"


def f58(fluid: int, ascii_only: bool | None = None) -> str:
    """F58 spelling of a job id: 'ƒ2fEnP1H' (or 'f2fEnP1H' when ascii_only)."""
    _check(fluid)
    if ascii_only is None:
        ascii_only = not utf8_locale()
    digits = []
    n = fluid
    while True:
        n, rem = divmod(n, 58)
        digits.append(_B58[rem])
        if n == 0:
            break
    return ("f" if ascii_only else "ƒ") + "".join(reversed(digits))


def f58_plain(fluid: int) -> str:
    """ASCII F58, safe in service names and file names: 'f2fEnP1H'."""
    return f58(fluid, ascii_only=True)


def dothex(fluid: int) -> str:
    """The dotted-hex form used in KVS paths: '0000.0004.b200.0000'."""
    _check(fluid)
    h = f"{fluid:016x}"
    return f"{h[:4]}.{h[4:8]}.{h[8:12]}.{h[12:]}"


# RFC 19's emoji digits, value 0 first (the RFC's table of 576, in its order)
_EMOJI = (
    "😃😄😁😆😅😂😉😊😍😘😚😋😜😝😏😒😌😔😪😷😵😲😳😨"
    "😰😥😢😭😱😖😣😞😓😩😫😤😡😠👿💀💩👹👺👻👽👾😺😸"
    "😹😻😼😽🙀😿😾🙈🙉🙊💌💘💝💖💗💓💞💕💟💔💛💚💙💜"
    "💋💯💢💥💫💦💨💬💤👋👌👈👉👆👇👍👎👊👏🙌👐🙏💅💪"
    "👂👃👀👅👄👶👦👧👱👨👩👴👵🙍🙎🙅🙆💁🙋🙇👮💂👷👸"
    "👳👲👰👼🎅💆💇🚶🏃💃👯🏂🏄🏊🛀👫💏💑👪👤👣🐵🐒🐶"
    "🐩🐺🐱🐯🐴🐎🐮🐷🐗🐽🐑🐫🐘🐭🐹🐰🐻🐨🐼🐾🐔🐣🐤🐥"
    "🐦🐧🐸🐢🐍🐲🐳🐬🐟🐠🐡🐙🐚🐌🐛🐜🐝🐞💐🌸💮🌹🌺🌻"
    "🌼🌷🌱🌴🌵🌾🌿🍀🍁🍂🍃🍄🍇🍈🍉🍊🍌🍍🍎🍏🍑🍒🍓🍅"
    "🍆🌽🌰🍞🍖🍗🍔🍟🍕🍳🍲🍱🍘🍙🍚🍛🍜🍝🍠🍢🍣🍤🍥🍡"
    "🍦🍧🍨🍩🍪🎂🍰🍫🍬🍭🍮🍯🍵🍶🍷🍸🍹🍺🍻🍴🔪🌏🗾🌋"
    "🗻🏠🏡🏢🏣🏥🏦🏨🏩🏪🏫🏬🏭🏯🏰💒🗼🗽🌁🌃🌄🌅🌆🌇"
    "🌉🎠🎡🎢💈🎪🚃🚄🚅🚇🚉🚌🚑🚒🚓🚕🚗🚙🚚🚲🚏🚨🚥🚧"
    "🚤🚢💺🚀🕛🕐🕑🕒🕓🕔🕕🕖🕗🕘🕙🕚🌑🌓🌔🌕🌙🌛🌟🌠"
    "🌌🌀🌈🌂🔥💧🌊🎃🎄🎆🎇🎈🎉🎊🎋🎍🎎🎏🎐🎑🎀🎁🎫🏆"
    "🏀🏈🎾🎳🎣🎽🎿🎯🔫🎱🔮🎮🎰🎲🃏🀄🎴🎭🎨👓👔👕👖👗"
    "👘👙👚👛👜👝🎒👞👟👠👡👢👑👒🎩🎓💄💍💎🔊📢📣🔔🎼"
    "🎵🎶🎤🎧📻🎷🎸🎹🎺🎻📱📲📞📟📠🔋🔌💻💽💾💿📀🎥🎬"
    "📺📷📹📼🔍🔎💡🔦🏮📔📕📖📗📘📙📚📓📒📃📜📄📰📑🔖"
    "💰💴💵💸💳💹📧📨📩📤📥📦📫📪📮📝💼📁📂📅📆📇📈📉"
    "📊📋📌📍📎📏📐🔒🔓🔏🔐🔑🔨💣🔧🔩🔗📡💉💊🚪🚽🚬🗿"
    "🏧🚹🚺🚻🚼🚾🚫🚭🔞🔃🔙🔚🔛🔜🔝🔯🔼🔽🎦📶📳📴💱💲"
    "🔱📛🔰🔟🔠🔡🔢🔣🔤🆎🆑🆒🆓🆔🆕🆖🆗🆘🆙🆚🈁🈶🈯🉐"
    "🈹🈚🈲🉑🈸🈴🈳🈺🈵🔴🔵🔶🔷🔸🔹🔺🔻💠🔘🔳🔲🏁🚩🎌"
)
_EMOJI_INDEX = {c: i for i, c in enumerate(_EMOJI)}


def emoji(fluid: int) -> str:
    """The emoji form of a job id (RFC 19): '😃' for 0."""
    _check(fluid)
    digits = []
    while True:
        fluid, digit = divmod(fluid, len(_EMOJI))
        digits.append(_EMOJI[digit])
        if not fluid:
            return "".join(reversed(digits))


def parse_emoji(text: str) -> int:
    """Decode the emoji form of a job id; ValueError otherwise."""
    value = 0
    for c in text.strip():
        digit = _EMOJI_INDEX.get(c)
        if digit is None:
            raise ValueError(f"invalid job id {text!r}: {c!r} is not one of RFC 19's "
                             "emoji digits")
        value = value * len(_EMOJI) + digit
    return _validate(value, text)


_WORD_GROUP = re.compile(r"[a-z]+(-[a-z]+){0,2}")


def words(fluid: int) -> str:
    """The mnemonic words of a job id, as Flux spells them:
    'natural-analyze-verbal--natural-analyze-verbal' for 2**64-1."""
    _check(fluid)
    import mnemonicode
    return mnemonicode.mnformat(fluid.to_bytes(8, "little"))


def parse_words(text: str) -> int:
    """Decode the mnemonic words of a job id (eight bytes, little-endian); ValueError
    otherwise."""
    s = text.strip().lower()
    if not all(_WORD_GROUP.fullmatch(g) for g in s.split("--")):
        raise ValueError(f"invalid job id {text!r}")
    import mnemonicode
    try:
        data = bytes(mnemonicode.mnparse(s))
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"invalid job id {text!r}: not a word of mnemonicode") from None
    if len(data) != 8:
        raise ValueError(f"invalid job id {text!r}: words of a job id encode eight bytes")
    return int.from_bytes(data, "little")


def parse(text: str) -> int:
    """Decode a job id given as F58, decimal, 0x-hex, dotted hex (with or without the
    kvs form's `job.`), mnemonic words or emoji; ValueError otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        return _validate(text, text)
    if not isinstance(text, str):
        raise ValueError(f"invalid job id {text!r}")
    s = text.strip()
    s = s[4:] if s.startswith("job.") else s  # the kvs form, job.DOTHEX (as Flux's parser)
    if not s:
        raise ValueError(f"invalid job id {text!r}")
    if "." in s:
        parts = s.split(".")
        if len(parts) != 4 or not all(p and len(p) <= 4 and _is_hex(p) for p in parts):
            raise ValueError(f"invalid job id {text!r}")
        value = 0
        for p in parts:
            value = (value << 16) | int(p, 16)
        return _validate(value, text)
    for prefix in _PREFIXES:
        if s.startswith(prefix) and len(s) > len(prefix):
            body = s[len(prefix):]
            if len(body) <= 12 and all(c in _B58_INDEX for c in body):
                value = 0
                for c in body:
                    value = value * 58 + _B58_INDEX[c]
                return _validate(value, text)
    if s.encode()[:2] == b"\xf0\x9f":       # RFC 19: an emoji id starts so
        return parse_emoji(s)
    if s.startswith("0x") and _is_hex(s[2:]) and len(s) > 2:
        return _validate(int(s, 16), text)
    if s.isascii() and s.isdigit():
        return _validate(int(s), text)
    if "-" in s and s.isascii() and _WORD_GROUP.fullmatch(s.split("--")[0].lower()):
        return parse_words(s)
    raise ValueError(f"invalid job id {text!r}")


def _validate(value: int, text) -> int:
    if not 0 <= value < (1 << 64):
        raise ValueError(f"invalid job id {text!r}")
    return value


def _check(fluid) -> None:
    """A job id is an integer from 0 to 2**64-1: anything else is refused before any
    arithmetic (a negative number would never reach zero by division)."""
    if type(fluid) is not int or not 0 <= fluid < (1 << 64):
        raise ValueError(f"invalid job id {fluid!r}: expected an integer from 0 to 2**64-1")


def _is_hex(s: str) -> bool:
    return bool(s) and all(c in "0123456789abcdefABCDEF" for c in s)
