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
             "reason": null}}}          # why values are null, if they are

Rates are bytes per second over the last interval; null means no value
(not monitored, counter unavailable, first sample, rotated out), and
``reason`` says which.
"""

import json
import os
import tempfile
import time

VERSION = 1


def write(path, doc):
    """Atomically replace ``path`` with ``doc`` (a dict) as JSON."""
    doc = dict(doc, version=VERSION)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix='.state-', dir=directory)
    try:
        with os.fdopen(fd, 'w') as f:
            json.dump(doc, f, sort_keys=True, separators=(',', ':'))
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


def read(path, max_age=None, now=None):
    """Read the state document, or None if absent, unreadable or stale.

    :param max_age: seconds after which the document counts as stale
        (an agent that stopped publishing must not steer the scheduler).
    """
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get('version') != VERSION:
        return None
    if max_age is not None:
        now = time.time() if now is None else now
        if now - float(doc.get('time', 0)) > max_age:
            return None
    return doc
