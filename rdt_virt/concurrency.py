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

"""Blocking calls in a process that eventlet may have monkey-patched.

rdt-virt's library runs inside nova-compute (the driver reads resctrl under
its ``flock``) and inside rdt-virt-agent, which never patches. nova-compute
runs under eventlet on Nova 31 to 33 (OpenStack 2025.1 to 2026.1; Nova 31
patches every process that imports it) and under native threads on Nova 34.
In a patched process a call that blocks in the kernel, such as ``flock`` on
a lock that libvirt or the agent holds, stops every green thread, and never
returns when the holder is another green thread of the same process.

This module is the one place that knows about eventlet. It exists for
OpenStack 2025.1 to 2026.1: delete the eventlet branches when 2026.1 leaves
the support matrix (``doc/source/install/support-matrix.rst``).
"""

import importlib
import sys


def patched():
    """Whether eventlet has monkey-patched this process's threads."""
    if sys.modules.get('eventlet') is None:
        return False
    from eventlet import patcher
    return patcher.is_monkey_patched('thread')


def native(name):
    """The stdlib module ``name`` as the OS provides it.

    libvirt's event loop blocks in C, so it needs a real thread even in a
    patched process, and its events then travel through a real queue. Call
    it when the module is needed, not at import: eventlet patches modules
    in place.
    """
    if patched():
        from eventlet import patcher
        return patcher.original(name)
    return importlib.import_module(name)


def _on_hub_thread():
    """Whether the caller runs on the OS thread of eventlet's green threads.

    That is the main thread: the patched ``threading.main_thread()`` still
    names it, while only the original ``_thread`` tells OS threads apart.
    """
    import threading

    from eventlet import patcher
    return (patcher.original('_thread').get_ident() ==
            threading.main_thread().ident)


def blocking(fn, *args):
    """``fn(*args)``, on a real OS thread where the process is patched.

    The calling green thread waits for it; the others go on. A caller that
    is itself a real thread (the agent's loop in a patched test process)
    calls directly: it stops nobody else, and eventlet's thread pool
    answers only the hub of the main thread, so waiting on it from another
    OS thread would never end.
    """
    if patched() and _on_hub_thread():
        from eventlet import tpool
        return tpool.execute(fn, *args)
    return fn(*args)
