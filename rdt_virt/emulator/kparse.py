# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The kernel's rules for parsing and printing numbers and CPU sets.

Resctrl accepts exactly what the kernel helpers accept, which is not what
Python's ``int()`` accepts: ``kstrtoul()`` takes an optional ``+``, a ``0x``
prefix only in base 16 (or base 0), one trailing newline and nothing else
(no inner or leading blanks); ``kstrtoint()`` with base 0 reads ``010`` as
octal. CPU masks are hexadecimal in 32-bit comma-separated chunks (``%*pb``)
and CPU lists are ranges (``%*pbl``). These functions reproduce those rules
so that the emulator accepts and rejects the same inputs as the kernel.
"""

import errno

_SPACE = ' \t\n\v\f\r'
_HEX = frozenset('0123456789abcdefABCDEF')
_ULONG_MAX = (1 << 64) - 1
_UINT_MAX = (1 << 32) - 1
_INT_MAX = (1 << 31) - 1


class KernelError(Exception):
    """An operation the kernel refuses.

    :param err: the errno the system call returns.
    :param status: text the kernel appends to ``info/last_cmd_status``
        (empty when the kernel leaves it alone).
    """

    def __init__(self, err, status=''):
        super().__init__(err, status)
        self.errno = err
        self.status = status


class ParseError(ValueError):
    """Invalid input; ``errno`` is what the kernel helper returns."""

    def __init__(self, err=errno.EINVAL):
        super().__init__(err)
        self.errno = err


def strim(text):
    """The kernel's ``strim()``: strip leading and trailing whitespace."""
    return text.strip(_SPACE)


def _digits(text, base):
    """Parse an unsigned number the way ``_parse_integer()`` does."""
    if base == 0:
        if text[:2].lower() == '0x' and len(text) > 2:
            base, text = 16, text[2:]
        elif text[:1] == '0':
            base = 8
        else:
            base = 10
    elif base == 16 and text[:2].lower() == '0x':
        text = text[2:]
    if text.endswith('\n'):
        text = text[:-1]
    if not text:
        raise ParseError()
    value = 0
    for ch in text:
        d = int(ch, 36) if ch.isalnum() and ch.isascii() else 99
        if d >= base:
            raise ParseError()
        value = value * base + d
    return value


def kstrtoul(text, base, limit=_ULONG_MAX):
    """``kstrtoul()``/``kstrtou32()``: unsigned, optional ``+``."""
    if text.startswith('+'):
        text = text[1:]
    value = _digits(text, base)
    if value > limit:
        raise ParseError(errno.ERANGE)
    return value


def kstrtou32(text, base):
    return kstrtoul(text, base, _UINT_MAX)


def kstrtoint(text, base):
    """``kstrtoint()``: signed 32-bit, optional sign."""
    negative = text.startswith('-')
    if negative:
        value = _digits(text[1:], base)
        if value > _INT_MAX + 1:
            raise ParseError(errno.ERANGE)
        return -value
    value = kstrtoul(text, base)
    if value > _INT_MAX:
        raise ParseError(errno.ERANGE)
    return value


def popcount(value):
    return bin(value).count('1')


def first_run(value, nbits):
    """``(first_bit, zero_bit)``: the first run of ones, as the kernel finds.

    ``first_bit`` is the lowest set bit (``nbits`` when none) and
    ``zero_bit`` the first clear bit at or above it.
    """
    first = 0
    while first < nbits and not value >> first & 1:
        first += 1
    zero = first
    while zero < nbits and value >> zero & 1:
        zero += 1
    return first, zero


# CPU masks and lists ---------------------------------------------------------

def format_cpumask(cpus, nbits):
    """``%*pb``: hex in 32-bit chunks, the first chunk as wide as it needs.

    >>> format_cpumask([0, 1], 2)
    '3'
    >>> format_cpumask([0], 40)
    '00,00000001'
    """
    value = 0
    for cpu in cpus:
        value |= 1 << cpu
    chunks = []
    top = nbits % 32 or 32
    pos = ((nbits + 31) // 32 - 1) * 32
    width = (top + 3) // 4
    while pos >= 0:
        chunks.append('%0*x' % (width, (value >> pos) & 0xffffffff))
        pos -= 32
        width = 8
    return ','.join(chunks)


def format_cpulist(cpus):
    """``%*pbl``: comma-separated ranges, empty for no CPU."""
    out = []
    cpus = sorted(set(cpus))
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else '%d-%d' % (cpus[i], cpus[j]))
        i = j + 1
    return ','.join(out)


def parse_cpumask(text, nbits):
    """``cpumask_parse()``: hex chunks of at most 32 bits.

    Chunks are separated by commas or blanks; runs of separators collapse,
    so ``"1,,5"`` is two chunks. The input ends at the first newline.

    :raises ParseError: EINVAL for a bad character, EOVERFLOW for a chunk
        wider than 32 bits, too many chunks or a bit beyond *nbits*.
    """
    text = text.split('\n', 1)[0]
    for ch in _SPACE:
        text = text.replace(ch, ',')
    chunks = [c for c in text.split(',') if c]
    if len(chunks) > (nbits + 31) // 32:
        raise ParseError(errno.EOVERFLOW)
    value = 0
    for chunk in chunks:
        # The kernel reads each chunk from its end, eight digits at most.
        tail_ok = all(c in _HEX for c in chunk[-8:])
        if len(chunk) > 8 and tail_ok and chunk[-9] in _HEX:
            raise ParseError(errno.EOVERFLOW)
        if not tail_ok or not all(c in _HEX for c in chunk):
            raise ParseError()
        value = (value << 32) | int(chunk, 16)
    if value >> nbits:
        raise ParseError(errno.EOVERFLOW)
    return {bit for bit in range(nbits) if value >> bit & 1}


def parse_cpulist(text, nbits):
    """``cpulist_parse()``: ``0-3,8``, ``all``, ``N`` and ``a-b:used/group``.

    :raises ParseError: EINVAL for bad syntax, ERANGE for a CPU at or beyond
        *nbits*.
    """
    text = text.split('\n', 1)[0]
    cpus = set()
    for ch in _SPACE:
        text = text.replace(ch, ',')
    for region in text.split(','):
        if not region:
            continue
        cpus |= _parse_region(region, nbits)
    return cpus


def _number(text, last):
    if text == 'N':
        return last
    if not text.isdigit() or not text.isascii():
        raise ParseError()
    value = int(text)
    if value > _UINT_MAX:
        raise ParseError(errno.EOVERFLOW)
    return value


def _parse_region(region, nbits):
    last = nbits - 1
    rng, _, pattern = region.partition(':')
    if rng.lower() == 'all':
        start, end = 0, last
    else:
        lo, dash, hi = rng.partition('-')
        start = _number(lo, last)
        end = _number(hi, last) if dash else start
    if pattern:
        used, slash, group = pattern.partition('/')
        if not slash:
            raise ParseError()
        used, group = _number(used, last), _number(group, last)
    else:
        used = group = end + 1
    if start > end or group == 0 or used > group:
        raise ParseError()
    if end >= nbits:
        raise ParseError(errno.ERANGE)
    out = set()
    for base in range(start, end + 1, group):
        out.update(range(base, min(base + used, end + 1)))
    return out


def kstrtobool(text):
    """The kernel's ``kstrtobool()``: only the first characters count.

    ``y``/``t``/``1`` (any case) are true, ``n``/``f``/``0`` false, ``on``
    and ``of`` true and false; anything else, and nothing, is EINVAL.
    """
    first = text[:1].lower()
    if first in ('y', 't', '1'):
        return True
    if first in ('n', 'f', '0'):
        return False
    if first == 'o':
        second = text[1:2].lower()
        if second == 'n':
            return True
        if second == 'f':
            return False
    raise KernelError(errno.EINVAL)
