/**
 * The deployment files, checked offline: docker/compose.yaml through Debian's docker-compose (`config`
 * validates it against the compose schema and resolves it), with the settings `npm run cluster` uses;
 * infra/k8s/*.yaml against the Kubernetes schemas (kubernetes-validate --strict, installed in
 * .venv/kubernetes-validate by scripts/setup), and the pieces that must agree with each other and with
 * the server (probes, selectors, the migrations Job, the settings' names).
 */
import { describe, expect, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parse, parseAllDocuments } from "yaml"
import { clusterEnv } from "../../scripts/infra/clusterEnv.ts"
import { ROOT } from "../support/GroveServer.ts"

const exec = (file: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv = process.env) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(file, [...args], { cwd: ROOT, env, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr }))
  })

const COMPOSE = path.join(ROOT, "docker/compose.yaml")
const K8S = path.join(ROOT, "infra/k8s")
const VALIDATE = path.join(ROOT, ".venv/kubernetes-validate/bin/kubernetes-validate")
const README = fs.readFileSync(path.join(ROOT, "README.md"), "utf8")

/** The names of the settings the README's Configuration table documents. */
const documentedVariables = new Set([...README.matchAll(/`(GROVE_[A-Z0-9_]+)`/g)].map((m) => m[1]!))

describe("docker/compose.yaml", () => {
  const composeConfig = (env: NodeJS.ProcessEnv) =>
    exec("docker-compose", ["--project-directory", path.join(ROOT, "docker"), "-f", COMPOSE, "config"], env)

  it("is a valid compose file: Kafka (KRaft), PostgreSQL, S3 and two Grove nodes with npm run cluster's settings", async () => {
    const run = await composeConfig({ ...process.env, GROVE_SECRET_KEY: "c2VjcmV0" })
    expect(run.code, run.stderr).toBe(0)
    const config = parse(run.stdout) as { services: Record<string, any> }
    const services = config.services
    expect(services.kafka.environment.KAFKA_PROCESS_ROLES).toBe("broker,controller")
    expect(services.postgres.image).toMatch(/^postgres:/)
    expect(services.minio.command).toEqual(["server", "/data"])

    const nodes = Object.entries(services).filter(([, s]) => Array.isArray(s.command) && s.command[0] === "serve")
    expect(nodes.length).toBeGreaterThanOrEqual(2)
    const clusterKeys = Object.keys(clusterEnv({ bootstrap: "k:1" }, { url: "pg" }, {} as never)).sort()
    for (const [name, node] of nodes) {
      const env = node.environment as Record<string, string>
      expect(Object.keys(env).filter((k) => clusterKeys.includes(k)).sort(), name).toEqual(clusterKeys)
      expect(env.GROVE_MODE).toBe("cluster")
      expect(env.GROVE_SECRET_KEY).toBe("c2VjcmV0")
      // The nodes' default session timeout (README, Configuration), which npm run cluster uses.
      expect(env.GROVE_KAFKA_SESSION_TIMEOUT_MS).toBe("3000")
      // Each node has its own id, and starts after the migrations and the bucket.
      expect(node.command).toContain("--node-id")
      expect(node.depends_on["grove-migrate"].condition).toBe("service_completed_successfully")
      expect(node.depends_on["minio-bucket"].condition).toBe("service_completed_successfully")
      for (const key of Object.keys(env)) expect(documentedVariables, key).toContain(key)
    }
    expect(new Set(nodes.map(([, n]) => n.command.join(" "))).size).toBe(nodes.length)
    expect(services["grove-migrate"].command).toEqual(["migrate"])

    // The broker's group settings are the local broker's (scripts/infra/kafka/server.properties).
    const properties = fs.readFileSync(path.join(ROOT, "scripts/infra/kafka/server.properties"), "utf8")
    const groupSettings = [...properties.matchAll(/^(group\.[a-z.]+)=(\S+)$/gm)]
    expect(groupSettings.length).toBeGreaterThan(4)
    for (const [, key, value] of groupSettings) {
      expect(services.kafka.environment[`KAFKA_${key!.toUpperCase().replaceAll(".", "_")}`], key).toBe(value)
    }
  })

  it("refuses to resolve without the nodes' shared secret key", async () => {
    const { GROVE_SECRET_KEY: _, ...env } = process.env
    const run = await composeConfig(env)
    expect(run.code).not.toBe(0)
    expect(run.stderr).toContain("GROVE_SECRET_KEY")
  })
})

describe("infra/k8s", () => {
  const files = fs.readdirSync(K8S).filter((f) => f.endsWith(".yaml")).sort()
  const docs = files.flatMap((file) =>
    parseAllDocuments(fs.readFileSync(path.join(K8S, file), "utf8")).map((d) => ({ file, doc: d.toJSON() as any }))
  )
  const ofKind = (kind: string) => docs.filter((d) => d.doc.kind === kind).map((d) => d.doc)

  it("every manifest passes the Kubernetes schemas (strict: no unknown fields)", async () => {
    expect(files.length).toBeGreaterThanOrEqual(6)
    const run = await exec(VALIDATE, ["--strict", ...files.map((f) => path.join(K8S, f))])
    expect(run.code, run.stdout + run.stderr).toBe(0)
    for (const file of files) expect(run.stdout + run.stderr).toMatch(new RegExp(`${file} passed`))
  })

  it("the validator rejects a misspelt field (the check can fail)", async () => {
    const bad = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "grove-k8s-")), "bad.yaml")
    try {
      fs.writeFileSync(bad, fs.readFileSync(path.join(K8S, "deployment.yaml"), "utf8").replace("readinessProbe:", "readinesProbe:"))
      const run = await exec(VALIDATE, ["--strict", bad])
      expect(run.code).not.toBe(0)
      expect(run.stdout + run.stderr).toContain("readinesProbe")
    } finally {
      fs.rmSync(path.dirname(bad), { recursive: true, force: true })
    }
  })

  it("the Deployment, its PodDisruptionBudget, Service, settings and migrations Job fit together", () => {
    const [deployment] = ofKind("Deployment")
    const labels = deployment.spec.template.metadata.labels
    expect(deployment.spec.selector.matchLabels).toEqual(labels)
    const container = deployment.spec.template.spec.containers[0]
    expect(container.args).toEqual(["serve"])
    expect(container.readinessProbe.httpGet.path).toBe("/readyz")
    expect(container.livenessProbe.httpGet.path).toBe("/healthz")
    expect(container.resources.requests.cpu).toBeDefined()
    expect(container.resources.requests.memory).toBeDefined()
    expect(container.resources.limits.memory).toBeDefined()
    expect(deployment.spec.template.spec.securityContext.runAsNonRoot).toBe(true)

    const matches = (selector: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v)
    const [pdb] = ofKind("PodDisruptionBudget")
    expect(matches(pdb.spec.selector.matchLabels)).toBe(true)
    const [service] = ofKind("Service")
    expect(matches(service.spec.selector)).toBe(true)
    expect(service.spec.ports[0].targetPort).toBe(container.ports[0].name)

    const [configMap] = ofKind("ConfigMap")
    const [secret] = ofKind("Secret")
    const [job] = ofKind("Job")
    const jobContainer = job.spec.template.spec.containers[0]
    expect(jobContainer.args).toEqual(["migrate"])
    expect(jobContainer.image).toBe(container.image)
    for (const c of [container, jobContainer]) {
      expect(c.envFrom).toEqual([{ configMapRef: { name: configMap.metadata.name } }, { secretRef: { name: secret.metadata.name } }])
    }
    // Every setting is one the server reads (the README's Configuration table).
    for (const key of [...Object.keys(configMap.data), ...Object.keys(secret.stringData), ...container.env.map((e: any) => e.name)]) {
      expect(documentedVariables, key).toContain(key)
    }
  })
})
