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

"""The host state file that rdt-virt-agent publishes.

rdt-virt-agent writes it after every sample; nova-compute (for the
scheduler's bandwidth pressure) and the Ceilometer pollsters read it. It is
replaced atomically (write to a temporary file, fsync, rename), so a reader
sees either the old or the new document, never half of one.

Document (JSON)::

    {"version": 1,
     "time": 1763800000.5,              # when the sample was taken (epoch)
     "interval": 10.0,                  # seconds the rates cover
     "host": {"mbm_total_bps": 1.2e9,   # sums over monitored instances
              "mbm_local_bps": 1.0e9,
              "llc_occupancy_bytes": 2.5e7,
              "rmids_total": 176, "rmids_used": 12,
              "monitored": 12, "instances": 12,
              "coverage": 1.0},         # share of instances with values
     "instances": {
         "<instance uuid>": {
             "name": "instance-00000001",
             "group": "rdtvirt-mb10",     # control group; null: default
             "mon_group": "rdtvirt-m-<uuid>",
             "policy": {"mem_bw": 10, ...},
             "mbm_total_bps": 1.0e8,      # null when there is no value
             "mbm_local_bps": 9.0e7,
             "llc_occupancy_bytes": 3.0e6,
             "priority": "low",           # hw:rdt_priority
             "level": 50,                 # controller's level in force in
                                          # "group", null: none
             "level_next": 10,            # decided, applied at the next
                                          # tick (only while it differs)
             "mb_limit": 50,              # MBA value in force (low only)
             "project_id": "5e0d2f4a...", # owning project (Nova's
                                          # <nova:owner>), null: unknown
             "reason": null}}}          # why values are null, if they are

Rates are bytes per second over the last interval; null means no value
(not monitored, counter unavailable, first sample, rotated out), and
``reason`` says which.

The version changes only when a reader of the previous one would misread
the document. A field is added without a new version: :func:`parse` keeps
fields it does not know, and every reader ignores them, so a reader one
release older reads a newer agent's document (``project_id`` came this
way). A reader must likewise accept a document without a field added
after version 1, as an older agent writes it.

Who writes it and what readers trust: only the agent's user can write the
file (its directory, ``/run/rdt-virt``, belongs to that user; the file is
mode 0644). Readers (nova-compute, the Ceilometer pollsters, the CLI) still
treat it as outside input: :func:`read` opens only a regular file that is
not a symlink, not writable by group or others, and at most
:data:`MAX_BYTES`, without blocking (a FIFO cannot hang a reader), and
:func:`parse` checks the document. A document whose shape is wrong (not
JSON, truncated, wrong version, no valid ``time``) is refused as a whole:
the reader acts as if the agent published nothing. Within a valid
document, an instance entry that is not an object is dropped, a number
that is not finite and non-negative becomes null, and a text field that is
not text becomes null, so one bad value never hides the others.
"""

import json
import math
import os
import stat
import tempfile
import time

from rdt_virt import exception

VERSION = 1
# Far more than 10,000 instances take (about 600 bytes each).
MAX_BYTES = 32 * 1024 * 1024
# A document is stale after three sample intervals, and never sooner than
# this (seconds).
MIN_MAX_AGE = 60.0
_NUMBERS = ('mbm_total_bps', 'mbm_local_bps', 'llc_occupancy_bytes',
            'rmids_total', 'rmids_used', 'closids_total', 'closids_used',
            'mon_budget', 'monitored', 'instances', 'coverage',
            'mon_coverage', 'power_watts', 'energy_joules', 'activity_fps',
            'level', 'level_next', 'mb_limit')
_TEXTS = ('name', 'domain', 'group', 'mon_group', 'counters', 'reason',
          'priority', 'project_id')


def write(path, doc):
    """Atomically replace ``path`` with ``doc`` (a dict) as JSON."""
    write_json(path, dict(doc, version=VERSION))


def write_json(path, doc):
    """Atomically replace ``path`` with ``doc`` as JSON, as it is."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix='.state-', dir=directory)
    try:
        with os.fdopen(fd, 'w') as f:
            # dumps(), not dump(): the same text from the C encoder in
            # one write, where dump() runs the Python one piece by piece.
            f.write(json.dumps(doc, sort_keys=True, separators=(',', ':')))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _number(value):
    """A finite non-negative number, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return value


def _no_constant(name):
    raise ValueError('%s is not a number' % name)


def _clean_numbers(entry):
    for key in _NUMBERS:
        if key in entry:
            entry[key] = _number(entry[key])


def parse(text):
    """Parse and check the text of a state document.

    :returns: the document, with bad values replaced as the module says.
    :raises: InvalidStateFile when it cannot be trusted as a whole.
    """
    if len(text) > MAX_BYTES:
        raise exception.InvalidStateFile(reason='larger than %d bytes'
                                         % MAX_BYTES)
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise exception.InvalidStateFile(reason='not JSON: %s' % e)
    if not isinstance(doc, dict):
        raise exception.InvalidStateFile(reason='not a JSON object')
    version = doc.get('version')
    if isinstance(version, bool) or version != VERSION:
        raise exception.InvalidStateFile(reason='version %r, not %d'
                                         % (version, VERSION))
    if _number(doc.get('time')) is None:
        raise exception.InvalidStateFile(reason='no valid time')
    if 'interval' in doc and _number(doc['interval']) is None:
        raise exception.InvalidStateFile(reason='invalid interval')
    host = doc.setdefault('host', {}) if 'host' in doc else {}
    if not isinstance(host, dict):
        raise exception.InvalidStateFile(reason='host is not an object')
    _clean_numbers(host)
    if 'instances' not in doc:
        return doc
    instances = doc['instances']
    if not isinstance(instances, dict):
        raise exception.InvalidStateFile(reason='instances is not an '
                                         'object')
    clean = {}
    for uuid, entry in instances.items():
        if not isinstance(entry, dict):
            continue
        entry = dict(entry)
        _clean_numbers(entry)
        for key in _TEXTS:
            if key in entry and not isinstance(entry[key], str):
                entry[key] = None
        if not isinstance(entry.get('policy', {}), dict):
            entry['policy'] = {}
        clean[uuid] = entry
    doc['instances'] = clean
    return doc


def _read_text(path):
    # O_NONBLOCK: opening a FIFO put in the file's place must not block;
    # O_NOFOLLOW: the agent replaces the file, never a link.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW |
                 os.O_CLOEXEC)
    with os.fdopen(fd, 'rb') as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise exception.InvalidStateFile(reason='%s is not a regular '
                                             'file' % path)
        if st.st_mode & 0o022:
            raise exception.InvalidStateFile(
                reason='%s is writable by group or others (mode %o)'
                % (path, stat.S_IMODE(st.st_mode)))
        data = f.read(MAX_BYTES + 1)
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError:
        raise exception.InvalidStateFile(reason='not UTF-8')


def load(path):
    """Read the state document or raise OSError or InvalidStateFile.

    For callers that tell a person why there is no state.
    """
    return parse(_read_text(path))


def max_age(doc):
    """Seconds after which ``doc`` counts as stale.

    Three of the agent's sample intervals, and at least
    :data:`MIN_MAX_AGE`: one late sample is not a dead agent. Every reader
    that shows or uses the agent's numbers (the Ceilometer pollsters,
    ``rdt-virt top``, nova-compute) applies this rule.
    """
    try:
        interval = float(doc.get('interval') or 0)
    except (TypeError, ValueError):
        interval = 0.0
    return max(3 * interval, MIN_MAX_AGE)


def age(doc, now=None):
    """Seconds since the sample of ``doc`` was taken."""
    now = time.time() if now is None else now
    return now - float(doc.get('time', 0))


def is_stale(doc, now=None):
    """True if the agent has stopped publishing ``doc``'s successors."""
    return age(doc, now) > max_age(doc)


def read(path, max_age=None, now=None):
    """Read the state document, or None if absent, invalid or stale.

    :param max_age: seconds after which the document counts as stale
        (an agent that stopped publishing must not steer the scheduler).
    """
    try:
        doc = load(path)
    except (OSError, exception.InvalidStateFile):
        return None
    if max_age is not None:
        now = time.time() if now is None else now
        if now - doc['time'] > max_age:
            return None
    return doc
