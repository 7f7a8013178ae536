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

"""Counter baselines carried across a restart of the agent.

A rate needs two readings of a counter, so an agent that starts afresh
publishes its first rates a sampling period after its first reading, and
a restart (an upgrade's, a configuration change's) leaves a gap of the
downtime plus up to two periods in every rate series. The MBM counters
themselves go on counting while the agent is down: resctrl keeps them as
long as the group's RMID lives. So an agent that stops gracefully writes
its baselines (:func:`save`) beside the state file, and the next one
(:func:`take`) starts from them: its first reading of a group it finds
as it was has a rate, the mean over the downtime.

What is taken back, and what is not:

* only a file written on this boot (``/proc/sys/kernel/random/boot_id``)
  and at most :data:`MAX_AGE` seconds before, on the agent's monotonic
  clock, which the baselines' times are on;
* only for a group the new agent adopted as it found it: a group it had
  to create, or whose MBM counter it assigned, starts from zero (a
  generation above 0 in :meth:`Monitoring.source_key`);
* every check of a rate still applies: a counter that shrank (the group
  was re-created under the same name while no agent ran) or grew faster
  than the host's memory can move gives no rate, as it would between two
  readings of one agent.

A crash writes nothing: the next agent starts as it did before. The file
is removed when taken, so it serves one start. Pure, but for
:func:`save` and :func:`take`.
"""

import json
import os

from rdt_virt.agent import state

VERSION = 1
#: The file's name: the state file's, with this after it.
SUFFIX = '.baselines'
#: The longest downtime whose baselines a new agent takes (seconds): an
#: upgrade's restart, not a host left without an agent for long.
MAX_AGE = 120.0


def path_for(state_file):
    return state_file + SUFFIX


def document(exported, boot_id, now):
    """What :func:`save` writes: :meth:`RateTracker.export` and when."""
    return {'version': VERSION, 'boot_id': boot_id, 'saved': now,
            'instances': exported}


def usable(doc, boot_id, now, max_age=MAX_AGE):
    """``{key: entry}`` of ``doc`` that a new agent may take, and why not.

    Returns (entries, reason): entries empty with the reason when the
    whole file is refused.
    """
    if not isinstance(doc, dict) or doc.get('version') != VERSION:
        return {}, 'unknown version'
    if not boot_id or doc.get('boot_id') != boot_id:
        return {}, 'written before the last boot'
    saved = doc.get('saved')
    if not isinstance(saved, (int, float)) or not 0 <= now - saved <= (
            max_age):
        return {}, 'older than %.0f s' % max_age
    entries = doc.get('instances')
    if not isinstance(entries, dict):
        return {}, 'no instances'
    return {key: entry for key, entry in entries.items()
            if _well_formed(entry)}, None


def _well_formed(entry):
    try:
        return (len(entry['source']) == 3 and all(
            len(c) == 4 and isinstance(c[2], (int, float)) and
            isinstance(c[3], (int, float)) for c in entry['counters']))
    except (KeyError, TypeError):
        return False


def matches(entry, source):
    """Whether ``entry``'s baselines hold for a reading from ``source``.

    The same group (``source``'s first two items), which the new agent
    adopted rather than created (its generation 0).
    """
    return source[2] == 0 and list(source[:2]) == list(entry['source'][:2])


def save(path, doc):
    """Write ``doc`` to ``path``, atomically."""
    state.write_json(path, doc)


def take(path):
    """The document at ``path``, which is removed; None if none is."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    try:
        return json.loads(text)
    except ValueError:
        return None
