"""The files `dream schedule` prints (``core.schedule`` fills in the schedule, the action
reference and the image): copies of docs/examples/dream-pr.yml and
deploy/kubernetes/cronjob-pvc.yaml with placeholders, kept in step with them by
tests/deploy/test_deploy_schedule.py. Text only, kept apart so core.schedule reads as its rules.
"""

from __future__ import annotations

GITHUB_WORKFLOW_TEMPLATE = """\
# Dream as pull requests: on a schedule, Dream drains the history committed to this repository
# into memory edits, and one pull request from the branch dream/memory shows them for review.
# Each run continues from that branch while its pull request is open (docs/deploy-github-actions.md):
# nothing is dreamt or paid for twice, held changes wait on the branch and in a second pull request
# (dream/review) that accepts them, and each branch is deleted once merged.
name: dream

on:
  schedule:
    - cron: "@@CRON@@"  # from `dream schedule --format github` (agents.defaults.dream)
  workflow_dispatch:

permissions: {}

concurrency:
  group: dream-${{ github.repository }}
  cancel-in-progress: false

jobs:
  dream:
    name: Dream
    runs-on: ubuntu-latest
    timeout-minutes: 30
    # The model's API key is an environment secret: Settings > Environments > dream, which can be
    # limited to the default branch (docs/deploy-github-actions.md).
    environment: dream
    permissions:
      contents: write  # push the dream/memory branch
      pull-requests: write  # open or update the pull request
    env:
      # Schedule events carry no repository in their payload; they run on the default branch.
      DEFAULT_BRANCH: ${{ github.event.repository.default_branch || github.ref_name }}
    steps:
      - uses: actions/checkout@08eba0b27e820071cde6df949e0beb9ba4906955 # v4.3.0
        with:
          ref: ${{ env.DEFAULT_BRANCH }}
          fetch-depth: 0  # brings origin/dream/memory, the open pull request's branch
          persist-credentials: false

      # The provenance notes (refs/notes/dream: the facts and history entries behind each memory
      # line, read by `dream why`) are not fetched by actions/checkout. With them, the rebase of
      # dream/memory carries each note over to its rebased commit (docs/provenance.md).
      - name: Fetch the provenance notes
        env:
          GITHUB_TOKEN: ${{ github.token }}
        run: |
          set -euo pipefail
          # The token reaches git only for this command, as an HTTP header (masked in the log).
          auth="$(printf 'x-access-token:%s' "$GITHUB_TOKEN" | base64 -w0)"
          echo "::add-mask::$auth"
          git -c "http.extraheader=AUTHORIZATION: basic $auth" fetch --quiet origin 'refs/notes/*:refs/notes/*'

      # Pin the full commit SHA of the dream-memory release you use:
      #   dream schedule --format github --action OWNER/REPO@SHA
      - id: dream
        uses: @@ACTION@@
        timeout-minutes: 20  # leaves the job time to push what Dream committed before a stop
        with:
          command: run
          workspace: .  # the folder holding SOUL.md, USER.md and memory/
          continue-from: dream/memory
          args: --max-seconds 1080  # ends between batches before the step's timeout
        env:
          DREAM_MODEL: ${{ vars.DREAM_MODEL }}  # a preset or a litellm id, e.g. openai/gpt-4o-mini
          DREAM_API_KEY: ${{ secrets.DREAM_API_KEY }}

      # dream/memory is pushed here, not by create-pull-request: that action cannot be told not to
      # push, and its lease is taken against the branch as it fetches it itself just before its
      # push, so a commit a reviewer pushed while Dream ran would be replaced. This push is leased
      # against the tip this job's checkout saw (refs/remotes/origin/dream/memory: no step before
      # this one fetches branches; none at all means the branch must still be absent). It pushes
      # this checkout (the default branch plus the branch's commits plus this run's) when it holds
      # anything beyond the default branch, else it deletes the merged branch. If the branch moved
      # meanwhile, nothing is pushed and the job fails, naming the branch: the next run continues
      # from it as the reviewer left it. It also runs after a failed Dream step: the batches
      # committed before the failure are kept (docs/deploy-github-actions.md).
      - id: branch
        name: Push dream/memory with a lease
        if: ${{ !cancelled() && steps.dream.outputs.update-pr == 'true' }}
        env:
          GITHUB_TOKEN: ${{ github.token }}
          BRANCH: dream/memory
        run: |
          set -euo pipefail
          start="$(git rev-parse -q --verify "refs/remotes/origin/$BRANCH" || true)"
          ahead="$(git rev-list --count "origin/$DEFAULT_BRANCH..HEAD")"
          if [ "$ahead" -gt 0 ]; then
            refspec="HEAD:refs/heads/$BRANCH"
          elif [ -n "$start" ]; then
            refspec=":refs/heads/$BRANCH"  # merged: nothing left on it (GitHub closes its pull request)
          else
            echo "nothing beyond $DEFAULT_BRANCH and no $BRANCH on the remote: nothing to push"
            exit 0
          fi
          # The token reaches git only for this command, as an HTTP header (masked in the log).
          auth="$(printf 'x-access-token:%s' "$GITHUB_TOKEN" | base64 -w0)"
          echo "::add-mask::$auth"
          lease="--force-with-lease=refs/heads/$BRANCH:$start"
          if out="$(git -c "http.extraheader=AUTHORIZATION: basic $auth" push --porcelain \\
                      "$lease" origin "$refspec" 2>&1)"; then
            if [ "$ahead" -gt 0 ]; then
              echo "$BRANCH is at $(git rev-parse --short HEAD), $ahead commit(s) beyond $DEFAULT_BRANCH" \\
                   "(leased against ${start:-its absence})"
              echo "pushed=true" >> "$GITHUB_OUTPUT"
            else
              echo "$BRANCH deleted: nothing on it beyond $DEFAULT_BRANCH (leased against $start)"
            fi
            exit 0
          fi
          echo "$out" >&2
          case "$out" in
            *"stale info"*)
              why="someone (a reviewer?) pushed to $BRANCH, or deleted it, while Dream ran"
              why="$why: it is no longer at ${start:-its absence}, where this run's checkout found it"
              next="Nothing was pushed or deleted and no pull request was opened or updated, so nothing"
              next="$next of theirs is overwritten. This run's commits are dropped; the next run continues"
              next="$next from $BRANCH as it is now, their commit included." ;;
            *)
              why="the push to $BRANCH failed"
              next="Nothing was pushed and no pull request was opened or updated. git said: $out" ;;
          esac
          printf '### %s not updated\\n\\n%s. %s\\n' "$BRANCH" "$why" "$next" >> "$GITHUB_STEP_SUMMARY"
          echo "::error::$BRANCH not updated: $why"
          exit 1

      # create-pull-request then finds dream/memory already equal to this checkout: it pushes
      # nothing and opens the pull request, or updates the open one (title, body, labels).
      - uses: peter-evans/create-pull-request@271a8d0340265f705b14b6d32b9829c1cb33d45e # v7.0.8
        if: ${{ !cancelled() && steps.branch.outcome == 'success' && steps.branch.outputs.pushed == 'true' }}
        with:
          branch: dream/memory
          base: ${{ env.DEFAULT_BRANCH }}
          title: "dream: memory updates"
          body-path: ${{ steps.dream.outputs.summary }}
          labels: dream
          delete-branch: true

      # Held changes get a pull request of their own, from dream/review: this checkout with every
      # held change accepted (`dream review accept --all`, one commit each), so the pull request
      # above, holding only what the write policy let through, can merge on its own. With nothing
      # held, or when a held change no longer merges, the checkout goes back to the default branch
      # and create-pull-request deletes dream/review (docs/deploy-github-actions.md).
      - id: review
        if: ${{ !cancelled() && steps.branch.outcome == 'success' }}
        env:
          DREAM: ${{ steps.dream.outputs.bin-dir }}/dream
          HELD: ${{ steps.dream.outputs.held }}
        run: |
          body="$RUNNER_TEMP/dream-review.md"
          {
            echo 'Changes Dream held for review (docs/dream.md, "Write policy and review"). Merging'
            echo 'this pull request accepts every one; to drop one instead, run'
            echo '`dream review reject ID` on the branch dream/memory and push.'
            echo
            echo '```text'
            "$DREAM" review --workspace .
            echo '```'
          } > "$body"
          echo "body=$body" >> "$GITHUB_OUTPUT"
          if [ "$HELD" = "0" ] || ! "$DREAM" review accept --all --workspace . >> "$body" 2>&1; then
            git reset -q --hard "origin/$DEFAULT_BRANCH"
          fi

      - uses: peter-evans/create-pull-request@271a8d0340265f705b14b6d32b9829c1cb33d45e # v7.0.8
        if: ${{ !cancelled() && steps.review.outcome == 'success' }}
        with:
          branch: dream/review
          base: ${{ env.DEFAULT_BRANCH }}
          title: "dream: changes held for review"
          body-path: ${{ steps.review.outputs.body }}
          labels: dream-review
          delete-branch: true

      # The notes of this run's commits (both branches') go to the remote's refs/notes/dream after
      # the pull requests: merged with the notes already there (notes are keyed by commit, so two
      # runs' notes rarely touch the same one; for one that both hold, this run's wins) and pushed
      # without force, so no other run's note is ever dropped. Rejected because the ref moved
      # meanwhile: fetch, merge, push again, three times at most (docs/provenance.md).
      - name: Push the provenance notes
        if: ${{ !cancelled() && steps.branch.outcome == 'success' }}
        env:
          GITHUB_TOKEN: ${{ github.token }}
        run: |
          set -euo pipefail
          git rev-parse -q --verify refs/notes/dream >/dev/null || exit 0  # no note to push
          auth="$(printf 'x-access-token:%s' "$GITHUB_TOKEN" | base64 -w0)"
          echo "::add-mask::$auth"
          g() { git -c "http.extraheader=AUTHORIZATION: basic $auth" -c user.name=dream-memory \\
                    -c user.email=dream-memory@localhost "$@"; }
          for attempt in 1 2 3; do
            if g fetch --quiet origin '+refs/notes/dream:refs/notes/dream-remote' 2>/dev/null; then
              g notes --ref dream merge --quiet --strategy ours refs/notes/dream-remote
            fi
            if g push --quiet origin refs/notes/dream:refs/notes/dream; then exit 0; fi
            echo "notes push rejected (attempt $attempt): another run pushed notes meanwhile; merging them"
          done
          echo "::error::the provenance notes were not pushed (dream why falls back to the commit bodies)"
          exit 1
"""

K8S_CRONJOB_TEMPLATE = """\
# Dream as a Kubernetes CronJob on a PersistentVolumeClaim that holds the workspace.
#   kubectl create secret generic dream-llm --from-literal=api-key=...
#   kubectl apply -f cronjob-pvc.yaml
# docs/deploy-kubernetes.md explains every setting; `dream schedule --format k8s` prints this
# file with the schedule from your config.
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: dream-workspace
  labels:
    app.kubernetes.io/name: dream-memory
spec:
  accessModes: ["ReadWriteOnce"]
  resources:
    requests:
      storage: 1Gi
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: dream
  labels:
    app.kubernetes.io/name: dream-memory
spec:
  schedule: "@@CRON@@"
  timeZone: Etc/UTC
  concurrencyPolicy: Forbid  # never two Dream runs on one workspace (a second would exit 75)
  startingDeadlineSeconds: 600
  successfulJobsHistoryLimit: 3
  failedJobsHistoryLimit: 3
  jobTemplate:
    spec:
      backoffLimit: 2
      activeDeadlineSeconds: 3600
      ttlSecondsAfterFinished: 86400
      podFailurePolicy:
        rules:
          # 2 (bad config, a workspace this uid cannot write) and 75 (locked) will not get
          # better by retrying at once: the Job ends after this one pod.
          - action: FailJob
            onExitCodes:
              containerName: dream
              operator: In
              values: [2, 75]
      template:
        metadata:
          labels:
            app.kubernetes.io/name: dream-memory
        spec:
          restartPolicy: Never
          # SIGTERM (the deadline, a deletion) reaches dream-run through tini at once; it stops
          # after the model call in flight (at most 2 s) with the interrupted report, exit 143.
          # The grace leaves room for that and for the git variant's last push.
          terminationGracePeriodSeconds: 30
          automountServiceAccountToken: false
          securityContext:
            runAsNonRoot: true
            runAsUser: 10001
            runAsGroup: 10001
            fsGroup: 10001
            fsGroupChangePolicy: OnRootMismatch
            seccompProfile:
              type: RuntimeDefault
          containers:
            - name: dream
              image: @@IMAGE@@
              imagePullPolicy: IfNotPresent
              env:
                - name: DREAM_WORKSPACE
                  value: /workspace
                - name: DREAM_MODEL
                  value: openai/gpt-4o-mini
                - name: DREAM_API_KEY
                  valueFrom:
                    secretKeyRef:
                      name: dream-llm
                      key: api-key
              resources:
                requests:
                  cpu: 100m
                  memory: 384Mi
                limits:
                  cpu: "1"
                  memory: 1Gi
              securityContext:
                allowPrivilegeEscalation: false
                readOnlyRootFilesystem: true
                capabilities:
                  drop: ["ALL"]
              volumeMounts:
                - name: workspace
                  mountPath: /workspace
                - name: tmp
                  mountPath: /tmp
          volumes:
            - name: workspace
              persistentVolumeClaim:
                claimName: dream-workspace
            - name: tmp
              emptyDir:
                sizeLimit: 256Mi
"""
