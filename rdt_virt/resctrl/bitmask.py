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

"""Cache capacity bit masks (CBMs), pure functions.

A CBM selects the cache ways a class of service may fill. Unless the
resource's ``sparse_masks`` is 1 the set bits must be contiguous, there must
be at least ``min_cbm_bits`` of them, and none may lie outside ``cbm_mask``.
``shareable_bits`` are ways that other agents (I/O, the GPU) may use too:
they can be given to a group, but never count as dedicated.
"""

import re

from rdt_virt import exception

_HEX = re.compile(r'\A(0[xX])?[0-9a-fA-F]+\Z')


def parse(text):
    """Parse a hexadecimal CBM as the kernel writes it (no ``0x``).

    A ``0x`` prefix is accepted, as the kernel does on writes; signs and
    digit separators are not.
    """
    text = text.strip()
    if not text:
        raise exception.InvalidMask(mask=repr(text), reason='empty mask')
    if not _HEX.match(text):
        raise exception.InvalidMask(mask=repr(text),
                                    reason='non-hex character in the mask')
    return int(text, 16)


def format(mask, width=None):
    """Format a CBM in lower-case hex, zero-padded to ``width`` bits."""
    digits = (width + 3) // 4 if width else 1
    return '%0*x' % (digits, mask)


def popcount(mask):
    return bin(mask).count('1')


def is_contiguous(mask):
    """True if the set bits of a non-zero ``mask`` form one run."""
    if mask <= 0:
        return False
    low = mask & -mask
    # Adding the lowest set bit carries through a single run of ones and
    # leaves no bit of the original mask set.
    return (mask + low) & mask == 0


def runs(mask):
    """Return the runs of set bits as ``[(start_bit, length), ...]``.

    Runs are ordered from the lowest bit up.
    """
    result = []
    bit = 0
    while mask:
        if mask & 1:
            start = bit
            while mask & 1:
                mask >>= 1
                bit += 1
            result.append((start, bit - start))
        else:
            mask >>= 1
            bit += 1
    return result


def run_mask(start, length):
    """The mask with ``length`` contiguous bits from bit ``start``."""
    return ((1 << length) - 1) << start


def validate(mask, cbm_mask, min_cbm_bits=1, sparse=False):
    """Raise :class:`~rdt_virt.exception.InvalidMask` as the kernel would.

    The kernel checks, in this order: the mask lies within ``cbm_mask``
    (and is non-zero unless ``min_cbm_bits`` is 0, as on AMD), its ones are
    contiguous unless sparse masks are allowed, and its *first* run of ones
    is at least ``min_cbm_bits`` long.

    :param mask: the candidate CBM.
    :param cbm_mask: the resource's full mask (``info/<res>/cbm_mask``).
    :param min_cbm_bits: ``info/<res>/min_cbm_bits``.
    :param sparse: ``info/<res>/sparse_masks`` is 1.
    """
    shown = format(mask)
    if mask < 0 or mask & ~cbm_mask or (mask == 0 and min_cbm_bits > 0):
        raise exception.InvalidMask(mask=shown, reason='mask out of range')
    if mask == 0:
        return
    if not sparse and not is_contiguous(mask):
        raise exception.InvalidMask(mask=shown,
                                    reason='has non-consecutive 1-bits')
    if runs(mask)[0][1] < min_cbm_bits:
        raise exception.InvalidMask(
            mask=shown, reason='needs at least %d bits' % min_cbm_bits)


def free_runs(used, cbm_mask):
    """Runs of ways that no mask in ``used`` covers, largest first.

    :param used: OR of every mask that already holds ways.
    :param cbm_mask: the resource's full mask.
    :returns: ``[(start_bit, length), ...]``, longest run first, then lowest.
    """
    free = cbm_mask & ~used
    return sorted(runs(free), key=lambda r: (-r[1], r[0]))


def largest_free_run(used, cbm_mask):
    """Length of the longest contiguous run of unused ways."""
    found = free_runs(used, cbm_mask)
    return found[0][1] if found else 0


def best_fit(used, cbm_mask, nbits):
    """Allocate ``nbits`` contiguous ways from the smallest run that fits.

    Best fit keeps large runs intact for later, larger requests. Within the
    chosen run the ways are taken from its low end. Returns the mask, or
    ``None`` when no free run is long enough.
    """
    if nbits <= 0:
        raise ValueError('nbits must be positive')
    candidates = [r for r in runs(cbm_mask & ~used) if r[1] >= nbits]
    if not candidates:
        return None
    start, _length = min(candidates, key=lambda r: (r[1], r[0]))
    return run_mask(start, nbits)


def low_ways(cbm_mask, nbits):
    """The lowest ``nbits`` ways of ``cbm_mask`` (which may not start at 0)."""
    start = (cbm_mask & -cbm_mask).bit_length() - 1
    return run_mask(start, nbits) & cbm_mask
