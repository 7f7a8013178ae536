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

"""Control channel of a running emulator: JSON lines on a UNIX socket.

The channel is how tests and the sandbox drive what a real host would do on
its own (counters moving, a remount) and read what only the emulator knows
(ground truth, the mutation log). It lives outside the resctrl tree.

Each request is one JSON object on one line, ``{"op": NAME, ...args}``; each
answer is ``{"ok": true, "result": ...}`` or ``{"ok": false, "error":
TEXT}``. Groups are named by their path in the mount: ``/`` (the root),
``g1``, ``g1/mon_groups/m1``, ``mon_groups/m0``. Operations:

=================  ==========================================================
``ping``           ``{"pong": true, "pid", "profile", "kernel"}``
``status``         profile, kernel and its features, mount options,
                   domains, groups, limbo delay
``log``            ``since`` (sequence number): mutation log entries
``truth``          every group's counters, as shown and per RMID
``energy_truth``   package telemetry (AET): ``{group: joules}``, the exact
                   core energy each group's ``core_energy`` files stood
                   for when they were last read (summed over packages)
``remount``        optional ``profile``: destroy all groups, reset the root
``set_counter``    ``group``, ``value`` [, ``domain``, ``event``]: pin value
``set_rate``       ``group``, ``rate`` bytes/s [, ``domain``, ``event``]
``set_sentinel``   ``group``, ``sentinel`` (``Unavailable``, ``Error``,
                   ``Unassigned`` or null) [, ``domain``, ``event``]
``clear``          ``group`` [, ``domain``, ``event``]: back to the model
``reset``          ``group``: zero its counters
``hardware_reset`` ``group`` [, ``seconds``, ``domain``, ``event``]: AMD
                   hardware stops tracking the RMID (``Unavailable``, then
                   the kernel's wrap jump)
``set_energy_rate`` ``group``, ``watts`` [, ``package``]: package telemetry
                   (AET) of the group's RMID grows by *watts* of
                   ``core_energy`` (and the matching ``activity``)
``set_limbo_delay`` ``seconds`` between two limbo checks (0: no limbo)
``limbo``          RMIDs in limbo: occupancy per domain, busy domains,
                   threshold, next check
``set_limbo_occupancy`` ``rmid``, ``value`` bytes or null to let it decay
                   [, ``domain``]: pin the occupancy of an RMID in limbo
``fail``           ``operation``, ``pattern``, ``errno`` [, ``count``,
                   ``skip``, ``status``]: refuse matching calls (see
                   :mod:`rdt_virt.emulator.faults`)
``faults``         the active refusal rules
``clear_faults``   [``id``]: drop one rule, or all
=================  ==========================================================

Omitting ``domain`` or ``event`` applies to all of them.
"""

import json
import os
import socket
import threading

from rdt_virt.emulator import faults as faults_mod
from rdt_virt.emulator import profiles


class ControlError(Exception):
    """The emulator refused a control request, or could not be reached."""


class ControlServer(object):
    """Serve control requests for *model* on the UNIX socket *path*."""

    def __init__(self, path, model, faults=None):
        self.path = path
        self.model = model
        self.faults = faults if faults is not None else faults_mod.Faults()
        self._sock = None
        self._thread = None
        self._stopping = False

    def start(self):
        if os.path.exists(self.path):
            os.unlink(self.path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(self.path)
        os.chmod(self.path, 0o600)
        self._sock.listen(8)
        self._thread = threading.Thread(target=self._accept, daemon=True,
                                        name='resctrl-control')
        self._thread.start()

    def stop(self):
        self._stopping = True
        if self._sock:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
        if os.path.exists(self.path):
            os.unlink(self.path)

    def _accept(self):
        while not self._stopping:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,),
                             daemon=True).start()

    def _serve(self, conn):
        with conn, conn.makefile('rwb') as stream:
            for line in stream:
                try:
                    request = json.loads(line)
                    result = self.handle(request)
                    answer = {'ok': True, 'result': result}
                except Exception as e:  # report, never kill the emulator
                    answer = {'ok': False, 'error': '%s: %s' % (
                        type(e).__name__, e)}
                stream.write(json.dumps(answer).encode() + b'\n')
                stream.flush()

    # Requests ----------------------------------------------------------------

    def handle(self, request):
        """Run one request (a dict) and return its result."""
        op = request.get('op')
        func = getattr(self, '_op_' + str(op), None)
        if func is None:
            raise ValueError('unknown op %r' % op)
        args = {k: v for k, v in request.items() if k != 'op'}
        with self.model.lock:
            return func(**args)

    def _group(self, path):
        group = self.model.find(path or '')
        if group is None:
            raise ValueError('no group %r' % path)
        if not self.model.profile.mon:
            raise ValueError('profile %s has no monitoring'
                             % self.model.profile.name)
        return group

    def _op_ping(self):
        return {'pong': True, 'pid': os.getpid(),
                'profile': self.model.profile.name,
                'kernel': self.model.kernel.spec}

    def _op_status(self):
        m = self.model
        return {'profile': m.profile.name,
                'kernel': m.kernel.spec,
                'kernel_features': sorted(m.kernel.features),
                'cmdline': m.profile.cmdline,
                'mount_options': list(m.profile.mount_options),
                'domains': list(m.domains),
                'groups': [g.path or '/' for g in m.all_groups()],
                'limbo_delay': m.limbo_delay,
                'last_cmd_status': m.last_cmd_status,
                'mba_effect': m.mba_effect_status()
                if getattr(m, 'mba_effect_status', None) else None}

    def _op_log(self, since=0):
        return self.model.log.since(int(since))

    def _op_truth(self):
        out = {}
        for path, data in self.model.counter_truth().items():
            out[path] = {
                'shown': {str(d): v for d, v in data['shown'].items()},
                'own': {str(d): v for d, v in data['own'].items()}}
        return out

    def _op_energy_truth(self):
        m = self.model
        if m.telemetry is None:
            return {}
        out = {}
        for (path, _package), joules in m.telemetry_reads.items():
            out[path] = out.get(path, 0.0) + joules
        return out

    def _op_remount(self, profile=None):
        name = profiles.get_profile(profile).name if profile else None
        self.model.remount(name)
        self.model.log.record('remount', '/', name)
        return self._op_status()

    def _inject(self, op, group, apply, domain=None, event=None, arg=None):
        g = self._group(group)
        self.model.refresh()
        apply(g, domain, event)
        self.model.log.record(op, g.path or '/', {
            'domain': domain, 'event': event, 'value': arg})
        return self.model.counters.describe(g)

    def _op_set_counter(self, group, value, domain=None, event=None):
        return self._inject('set_counter', group, lambda g, d, e: (
            self.model.counters.inject_value(g, int(value), d, e)),
            domain, event, value)

    def _op_set_rate(self, group, rate, domain=None, event=None):
        return self._inject('set_rate', group, lambda g, d, e: (
            self.model.counters.inject_rate(g, float(rate), d, e)),
            domain, event, rate)

    def _op_set_sentinel(self, group, sentinel, domain=None, event=None):
        return self._inject('set_sentinel', group, lambda g, d, e: (
            self.model.counters.set_sentinel(g, sentinel, d, e)),
            domain, event, sentinel)

    def _op_clear(self, group, domain=None, event=None):
        return self._inject('clear', group, lambda g, d, e: (
            self.model.counters.clear(g, d, e)), domain, event)

    def _op_reset(self, group):
        return self._inject('reset', group, lambda g, d, e: (
            self.model.counters.reset(g)))

    def _op_limbo(self):
        out = self.model.limbo()
        for entry in out['limbo']:
            entry['occupancy'] = {str(d): v
                                  for d, v in entry['occupancy'].items()}
        return out

    def _op_set_limbo_occupancy(self, rmid, value, domain=None):
        self.model.refresh()
        try:
            self.model.set_limbo_occupancy(int(rmid), value, domain)
        except KeyError:
            raise ValueError('RMID %r is not in limbo' % rmid) from None
        self.model.log.record('set_limbo_occupancy', '/', {
            'rmid': rmid, 'domain': domain, 'value': value})
        return self._op_limbo()

    def _op_hardware_reset(self, group, seconds=1.0, domain=None,
                           event=None):
        if self.model.profile.vendor != 'amd':
            raise ValueError('only AMD hardware resets the counters of '
                             'RMIDs it stops tracking')
        if self.model.assign_enabled:
            raise ValueError('assigned counters (mbm_event mode) are not '
                             'reset by the hardware')
        return self._inject('hardware_reset', group, lambda g, d, e: (
            self.model.counters.hardware_reset(g, float(seconds), d, e)),
            domain, event, seconds)

    def _op_set_energy_rate(self, group, watts, package=None):
        m = self.model
        if m.telemetry is None:
            raise ValueError('this host has no package telemetry')
        g = self._group(group)
        m.refresh()
        spec = m.telemetry.spec
        for pkg in ([package] if package is not None else m.domains):
            m.telemetry.inject_rate(g.rmid, pkg, 'core_energy',
                                    float(watts))
            m.telemetry.inject_rate(g.rmid, pkg, 'activity',
                                    float(watts) / spec.volts_squared)
        m.log.record('set_energy_rate', g.path or '/', {
            'package': package, 'value': watts})
        return {'rmid': g.rmid}

    def _op_set_limbo_delay(self, seconds):
        self.model.limbo_delay = float(seconds)
        self.model.log.record('set_limbo_delay', '/', seconds)
        return self.model.limbo_delay

    def _op_fail(self, operation, pattern, errno, count=1, skip=0,
                 status=None):
        return self.faults.add(operation, pattern, errno, count, skip, status)

    def _op_faults(self):
        return self.faults.describe()

    def _op_clear_faults(self, id=None):
        return self.faults.clear(id)


class ControlClient(object):
    """Client of a running emulator's control socket.

    Each method sends one request and returns its result or raises
    :class:`ControlError`. Domain keys in :meth:`truth` are ints.
    """

    def __init__(self, path, timeout=10.0):
        self.path = path
        self.timeout = timeout

    def call(self, op, **args):
        request = dict(args, op=op)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(self.timeout)
                sock.connect(self.path)
                sock.sendall(json.dumps(request).encode() + b'\n')
                data = b''
                while not data.endswith(b'\n'):
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    data += chunk
        except OSError as e:
            raise ControlError('cannot reach the emulator at %s: %s'
                               % (self.path, e)) from None
        try:
            answer = json.loads(data)
        except ValueError:
            raise ControlError('bad answer from %s: %r'
                               % (self.path, data)) from None
        if not answer.get('ok'):
            raise ControlError(answer.get('error', 'unknown error'))
        return answer.get('result')

    def ping(self):
        return self.call('ping')

    def status(self):
        return self.call('status')

    def log(self, since=0):
        """Mutation log entries after sequence number *since*."""
        return self.call('log', since=since)

    def truth(self):
        """``{group: {'shown': {dom: {event: value}}, 'own': ...}}``."""
        out = self.call('truth')
        for data in out.values():
            for key in ('shown', 'own'):
                data[key] = {int(d): v for d, v in data[key].items()}
        return out

    def remount(self, profile=None):
        return self.call('remount', profile=profile)

    def energy_truth(self):
        """``{group: exact core joules of its RMID}`` (AET hosts)."""
        return self.call('energy_truth')

    def set_counter(self, group, value, domain=None, event=None):
        return self.call('set_counter', group=group, value=value,
                         domain=domain, event=event)

    def set_rate(self, group, rate, domain=None, event=None):
        return self.call('set_rate', group=group, rate=rate, domain=domain,
                         event=event)

    def set_sentinel(self, group, sentinel, domain=None, event=None):
        return self.call('set_sentinel', group=group, sentinel=sentinel,
                         domain=domain, event=event)

    def clear(self, group, domain=None, event=None):
        return self.call('clear', group=group, domain=domain, event=event)

    def reset(self, group):
        return self.call('reset', group=group)

    def hardware_reset(self, group, seconds=1.0, domain=None, event=None):
        return self.call('hardware_reset', group=group, seconds=seconds,
                         domain=domain, event=event)

    def set_limbo_delay(self, seconds):
        return self.call('set_limbo_delay', seconds=seconds)

    def set_energy_rate(self, group, watts, package=None):
        """Package telemetry of *group* grows by *watts* (AET hosts)."""
        return self.call('set_energy_rate', group=group, watts=watts,
                         package=package)

    @staticmethod
    def _limbo(out):
        for entry in out['limbo']:
            entry['occupancy'] = {int(d): v
                                  for d, v in entry['occupancy'].items()}
        return out

    def limbo(self):
        """RMIDs in limbo; occupancy keys are domain ints."""
        return self._limbo(self.call('limbo'))

    def set_limbo_occupancy(self, rmid, value, domain=None):
        """Pin an RMID's occupancy in limbo (*value* None: decay)."""
        return self._limbo(self.call('set_limbo_occupancy', rmid=rmid,
                                     value=value, domain=domain))

    def fail(self, operation, pattern, errno, count=1, skip=0,
             status=None):
        """Refuse the next matching calls; returns the rule."""
        return self.call('fail', operation=operation, pattern=pattern,
                         errno=errno, count=count, skip=skip, status=status)

    def faults(self):
        return self.call('faults')

    def clear_faults(self, rule_id=None):
        return self.call('clear_faults', id=rule_id)
