"""Run a CronJob manifest's Job with docker, as the manifest declares it (no cluster runs here).

    python ci/docker/k8s_sim.py MANIFEST [options] --out result.json

What is taken from the manifest as written: the pod's securityContext (runAsUser, runAsGroup,
fsGroup as a supplementary group), each container's image (through --image), command and args
(command replaces the image's entrypoint, args its command), env (values, and secretKeyRef from
--secret), securityContext (readOnlyRootFilesystem -> --read-only, capabilities.drop ALL,
allowPrivilegeEscalation false -> no-new-privileges), volumeMounts over emptyDir (a fresh folder per
pod, group fsGroup, mode 2777 as the kubelet makes it), persistentVolumeClaim (--pvc, with fsGroup
applied the way the kubelet does unless --fsgroup-ignored says the driver ignores it), configMap
and secret volumes (files, defaultMode, group fsGroup), initContainers before the container,
restartPolicy Never, and the Job's policies: backoffLimit, podFailurePolicy (onExitCodes with
containerName, In/NotIn; FailJob, FailIndex, Ignore, Count), completionMode Indexed with
completions and backoffLimitPerIndex (JOB_COMPLETION_INDEX in the env; indexes run one after the
other), activeDeadlineSeconds (the running pod is stopped like the kubelet stops it: SIGTERM, then
SIGKILL after terminationGracePeriodSeconds) and ttl-less bookkeeping of every pod.

What stands in for the cluster: --image maps the manifest's image names to local ones, --pvc maps
claims to host folders, --mount adds a host folder (e.g. a bare repository playing the git
remote), --env overrides or adds a variable of one container (the model's endpoint), and
--network host replaces the pod network. The result (pods, exit codes, the Job's condition) is
printed and written as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

DOCKER = os.environ.get("DOCKER", "docker")


def load_cronjob(path: Path, name: str | None) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    jobs = [d for d in docs if d.get("kind") == "CronJob" and (name is None or d["metadata"]["name"] == name)]
    if len(jobs) != 1:
        raise SystemExit(f"k8s_sim: expected one CronJob in {path}, found {len(jobs)}")
    return {"cronjob": jobs[0], "configmaps": {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ConfigMap"}}


def chown_tree(root: Path, gid: int) -> None:
    """What the kubelet does for fsGroup: group ownership, group rw, setgid folders."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        os.chown(path, -1, gid)
        mode = path.stat().st_mode
        extra = stat.S_IRGRP | stat.S_IWGRP | (stat.S_IXGRP | stat.S_ISGID if path.is_dir() else 0)
        path.chmod(stat.S_IMODE(mode) | extra)


class Pod:
    def __init__(self, sim: Sim, index: int | None, attempt: int) -> None:
        self.sim, self.index, self.attempt = sim, index, attempt
        self.tmp = Path(tempfile.mkdtemp(prefix="k8s-sim-pod-", dir=sim.workdir))
        self.tmp.chmod(0o755)
        self.volumes = self._make_volumes()

    def _make_volumes(self) -> dict[str, Path]:
        spec, fs_group = self.sim.pod_spec, self.sim.fs_group
        out: dict[str, Path] = {}
        for volume in spec.get("volumes", []):
            name = volume["name"]
            if "emptyDir" in volume:
                folder = self.tmp / f"empty-{name}"
                folder.mkdir()
                os.chown(folder, 0, fs_group if fs_group is not None else 0)
                folder.chmod(0o2777 if fs_group is not None else 0o777)
                out[name] = folder
            elif "persistentVolumeClaim" in volume:
                claim = volume["persistentVolumeClaim"]["claimName"]
                folder = Path(self.sim.pvcs[claim])
                root_gid = folder.stat().st_gid
                if fs_group is not None and claim not in self.sim.fsgroup_ignored and root_gid != fs_group:
                    chown_tree(folder, fs_group)  # fsGroupChangePolicy OnRootMismatch
                out[name] = folder
            elif "configMap" in volume:
                folder = self.tmp / f"cm-{name}"
                folder.mkdir()
                data = self.sim.configmaps[volume["configMap"]["name"]].get("data", {})
                for key, value in data.items():
                    (folder / key).write_text(value, encoding="utf-8")
                out[name] = folder
            elif "secret" in volume:
                folder = self.tmp / f"secret-{name}"
                folder.mkdir()
                folder.chmod(0o755)
                secret = volume["secret"]["secretName"]
                mode = volume["secret"].get("defaultMode", 0o644)
                for (sname, key), value in self.sim.secrets.items():
                    if sname == secret:
                        path = folder / key
                        path.write_text(value, encoding="utf-8")
                        os.chown(path, 0, fs_group if fs_group is not None else 0)
                        path.chmod(mode)
                out[name] = folder
            else:
                raise SystemExit(f"k8s_sim: volume {name}: kind not simulated")
        return out

    def docker_args(self, container: dict[str, Any]) -> list[str]:
        sim, pod_sc = self.sim, self.sim.pod_spec.get("securityContext", {})
        name = f"k8s-sim-{uuid.uuid4().hex[:10]}"
        args = ["run", "-d", "--name", name, "--network", sim.network]
        if "runAsUser" in pod_sc:
            args += ["--user", f"{pod_sc['runAsUser']}:{pod_sc.get('runAsGroup', pod_sc['runAsUser'])}"]
        groups = [*([sim.fs_group] if sim.fs_group is not None else []), *pod_sc.get("supplementalGroups", [])]
        for gid in groups:
            args += ["--group-add", str(gid)]
        sc = container.get("securityContext", {})
        if sc.get("readOnlyRootFilesystem"):
            args.append("--read-only")
        if "ALL" in sc.get("capabilities", {}).get("drop", []):
            args += ["--cap-drop", "ALL"]
        if sc.get("allowPrivilegeEscalation") is False:
            args += ["--security-opt", "no-new-privileges"]
        env: dict[str, str] = {}
        if self.index is not None:
            env["JOB_COMPLETION_INDEX"] = str(self.index)
        for item in container.get("env", []):
            if "value" in item:
                env[item["name"]] = str(item["value"])
            else:
                ref = item["valueFrom"]["secretKeyRef"]
                env[item["name"]] = sim.secrets[(ref["name"], ref["key"])]
        env.update(sim.env_overrides.get(container["name"], {}))
        for key, value in env.items():
            args += ["-e", f"{key}={value}"]
        for mount in container.get("volumeMounts", []):
            ro = ":ro" if mount.get("readOnly") else ""
            args += ["-v", f"{self.volumes[mount['name']]}:{mount['mountPath']}{ro}"]
        for host, inside in sim.mounts:
            args += ["-v", f"{host}:{inside}"]
        command = list(container.get("command", []))
        if command:
            args += ["--entrypoint", command[0]]
        image = sim.images.get(container["image"], container["image"])
        return [*args, image, *command[1:], *container.get("args", [])]

    def run(self, container: dict[str, Any], deadline: float | None) -> dict[str, Any]:
        args = self.docker_args(container)
        name = args[args.index("--name") + 1]
        started = time.monotonic()
        subprocess.run([DOCKER, *args], check=True, capture_output=True, text=True)
        killed = False
        stop_seconds = None
        while True:
            state = json.loads(
                subprocess.run(
                    [DOCKER, "inspect", "--format", "{{json .State}}", name], check=True, capture_output=True, text=True
                ).stdout
            )
            if not state["Running"]:
                break
            if (deadline is not None and time.monotonic() >= deadline) or (
                self.sim.deadline_file is not None and self.sim.deadline_file.exists()
            ):
                grace = int(self.sim.pod_spec.get("terminationGracePeriodSeconds", 30))
                t0 = time.monotonic()
                subprocess.run([DOCKER, "stop", "-t", str(grace), name], check=True, capture_output=True)
                stop_seconds = round(time.monotonic() - t0, 2)
                killed = True
                continue
            time.sleep(0.2)
        logs = subprocess.run([DOCKER, "logs", name], capture_output=True, text=True, check=False)
        stem = f"pod-{'' if self.index is None else str(self.index) + '-'}{self.attempt}-{container['name']}"
        (self.sim.workdir / f"{stem}.out").write_text(logs.stdout, encoding="utf-8")
        (self.sim.workdir / f"{stem}.err").write_text(logs.stderr, encoding="utf-8")
        subprocess.run([DOCKER, "rm", "-f", name], capture_output=True, check=False)
        return {
            "index": self.index,
            "attempt": self.attempt,
            "container": container["name"],
            "exit": state["ExitCode"],
            "seconds": round(time.monotonic() - started, 2),
            "deadline_stop": killed,
            "stop_seconds": stop_seconds,
            "stderr_tail": logs.stderr.strip().splitlines()[-3:],
        }

    def cleanup(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


class Sim:
    def __init__(self, args: argparse.Namespace) -> None:
        loaded = load_cronjob(Path(args.manifest), args.cronjob)
        self.configmaps = loaded["configmaps"]
        self.job = loaded["cronjob"]["spec"]["jobTemplate"]["spec"]
        self.pod_spec = self.job["template"]["spec"]
        self.fs_group = self.pod_spec.get("securityContext", {}).get("fsGroup")
        self.images = dict(i.split("=", 1) for i in args.image)
        self.pvcs = dict(p.split("=", 1) for p in args.pvc)
        self.fsgroup_ignored = set(args.fsgroup_ignored)
        self.secrets = {tuple(k.split("=", 1)[0].split("/", 1)): k.split("=", 1)[1] for k in args.secret}
        self.env_overrides: dict[str, dict[str, str]] = {}
        for item in args.env:
            container, _, pair = item.partition(":")
            key, _, value = pair.partition("=")
            self.env_overrides.setdefault(container, {})[key] = value
        self.mounts = [tuple(m.split(":", 1)) for m in args.mount]
        self.network = args.network
        self.deadline_s = args.active_deadline or self.job.get("activeDeadlineSeconds")
        self.deadline_file = Path(args.deadline_at_file) if args.deadline_at_file else None
        self.workdir = Path(args.workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)

    def policy_action(self, result: dict[str, Any]) -> str:
        for rule in self.job.get("podFailurePolicy", {}).get("rules", []):
            codes = rule.get("onExitCodes")
            if not codes:
                continue
            if codes.get("containerName") not in (None, result["container"]):
                continue
            inside = result["exit"] in codes["values"]
            if inside == (codes.get("operator", "In") == "In"):
                return str(rule["action"])
        return "Count"

    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        deadline = started + float(self.deadline_s) if self.deadline_s else None
        indexed = self.job.get("completionMode") == "Indexed"
        indexes: list[int | None] = list(range(int(self.job.get("completions", 1)))) if indexed else [None]
        pods: list[dict[str, Any]] = []
        failures = 0
        failed_indexes: list[int] = []
        condition, reason = "Complete", ""
        for index in indexes:
            index_failures = 0
            while True:
                pod = Pod(self, index, index_failures + (0 if indexed else failures))
                outcome: dict[str, Any] | None = None
                try:
                    for container in [*self.pod_spec.get("initContainers", []), *self.pod_spec["containers"]]:
                        outcome = pod.run(container, deadline)
                        pods.append(outcome)
                        if outcome["exit"] != 0:
                            break
                finally:
                    pod.cleanup()
                assert outcome is not None
                if outcome["exit"] == 0:
                    break
                if outcome["deadline_stop"] or (deadline is not None and time.monotonic() >= deadline):
                    condition, reason = "Failed", "DeadlineExceeded"
                    return self._result(pods, condition, reason, failed_indexes, started)
                action = self.policy_action(outcome)
                if action == "FailJob":
                    return self._result(pods, "Failed", "PodFailurePolicy", failed_indexes, started)
                if action == "FailIndex" and index is not None:
                    failed_indexes.append(index)
                    break
                if action == "Ignore":
                    continue
                failures += 1
                index_failures += 1
                if indexed and "backoffLimitPerIndex" in self.job:
                    if index_failures > int(self.job["backoffLimitPerIndex"]):
                        failed_indexes.append(index)  # type: ignore[arg-type]
                        break
                elif failures > int(self.job.get("backoffLimit", 6)):
                    return self._result(pods, "Failed", "BackoffLimitExceeded", failed_indexes, started)
        if failed_indexes:
            condition, reason = "Failed", "FailedIndexes"
        return self._result(pods, condition, reason, failed_indexes, started)

    def _result(
        self, pods: list[dict[str, Any]], condition: str, reason: str, failed: list[int], started: float
    ) -> dict[str, Any]:
        return {
            "condition": condition,
            "reason": reason,
            "pods": len({(p["index"], p["attempt"]) for p in pods}),
            "failed_indexes": failed,
            "seconds": round(time.monotonic() - started, 2),
            "containers": pods,
        }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("manifest")
    parser.add_argument("--cronjob")
    parser.add_argument("--image", action="append", default=[], help="MANIFEST_IMAGE=LOCAL_IMAGE")
    parser.add_argument("--pvc", action="append", default=[], help="CLAIM=HOST_FOLDER")
    parser.add_argument("--fsgroup-ignored", action="append", default=[], help="CLAIM whose driver ignores fsGroup")
    parser.add_argument("--secret", action="append", default=[], help="NAME/KEY=VALUE")
    parser.add_argument("--env", action="append", default=[], help="CONTAINER:NAME=VALUE")
    parser.add_argument("--mount", action="append", default=[], help="HOST:PATH in every container")
    parser.add_argument("--active-deadline", type=float, default=None)
    parser.add_argument(
        "--deadline-at-file",
        help="the deadline passes when this file appears (the proof's stand-in for a fixed "
        "activeDeadlineSeconds: it arrives while the run waits on a model, on any machine speed)",
    )
    parser.add_argument("--network", default="host")
    parser.add_argument("--workdir", required=True, help="folder for the pods' volumes and logs")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    result = Sim(args).run()
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "containers"}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
