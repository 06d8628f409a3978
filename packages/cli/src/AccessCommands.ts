/**
 * The access commands of `grove`: `org`, `group`, `sa` (service accounts and their keys), `key`
 * (personal API keys) and `perms` (path permissions). Their bodies are imported on first use, like
 * every command's. Flags are named after the API's fields: a personal key's `--scope` (full or read),
 * a service-account key's `--scopes` (a list; `--scope` is accepted there too).
 */
import { Effect } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { action, load, Switch } from "./CommandAction.ts"

const orgModule = () => load(() => import("./commands/Org.ts"))
const saModule = () => load(() => import("./commands/ServiceAccount.ts"))
const groupModule = () => load(() => import("./commands/Group.ts"))
const keyModule = () => load(() => import("./commands/Key.ts"))
const permsModule = () => load(() => import("./commands/Perms.ts"))

const orgArgument = Argument.String("org").pipe(Argument.withDescription("The organization's slug"))
const userArgument = Argument.String("user").pipe(Argument.withDescription("A user name"))
const roleArgument = Argument.Literals("role", ["member", "admin", "owner"]).pipe(
  Argument.withDescription("member: read and push branches; admin: also merge, settings, members; owner: also owners")
)
const orgFlag = Flag.String("org").pipe(Flag.withMetavar("ORG"), Flag.withDescription("The organization"))
const accountArgument = Argument.String("account").pipe(Argument.withDescription("The service account's name"))

const orgList = Command.make("list", {}, () => action((remote) => Effect.flatMap(orgModule(), (m) => m.list(remote)))).pipe(
  Command.withDescription("List the organizations you belong to, with your role")
)

const orgCreate = Command.make("create", {
  org: orgArgument,
  name: Flag.String("name").pipe(Flag.withMetavar("NAME"), Flag.withDescription("Display name (default: the slug)"), Flag.optional),
  description: Flag.String("description").pipe(Flag.withMetavar("TEXT"), Flag.withDescription("A description"), Flag.optional)
}, (input) => action((remote) => Effect.flatMap(orgModule(), (m) => m.create(remote, { slug: input.org, name: input.name, description: input.description }))))
  .pipe(Command.withDescription("Create an organization (you become its owner)"))

const orgShow = Command.make("show", { org: orgArgument }, (input) =>
  action((remote) => Effect.flatMap(orgModule(), (m) => m.show(remote, { slug: input.org })))).pipe(Command.withDescription("Show an organization"))

const orgMembers = Command.make("members", { org: orgArgument }, (input) =>
  action((remote) => Effect.flatMap(orgModule(), (m) => m.members(remote, { slug: input.org })))).pipe(
    Command.withDescription("List an organization's members and their roles")
  )

const orgAdd = Command.make("add", {
  org: orgArgument,
  user: userArgument,
  role: Flag.Literals("role", ["member", "admin", "owner"]).pipe(Flag.withDefault("member" as const), Flag.withDescription("The role (default: member)"))
}, (input) => action((remote) => Effect.flatMap(orgModule(), (m) => m.add(remote, { slug: input.org, username: input.user, role: input.role }))))
  .pipe(Command.withDescription("Add a user to an organization (owners and admins)"))

const orgRemove = Command.make("remove", { org: orgArgument, user: userArgument }, (input) =>
  action((remote) => Effect.flatMap(orgModule(), (m) => m.remove(remote, { slug: input.org, username: input.user })))).pipe(
    Command.withDescription("Remove a member (owners and admins; the last owner stays)")
  )

const orgRole = Command.make("role", { org: orgArgument, user: userArgument, role: roleArgument }, (input) =>
  action((remote) => Effect.flatMap(orgModule(), (m) => m.role(remote, { slug: input.org, username: input.user, role: input.role })))).pipe(
    Command.withDescription("Change a member's role (only owners touch the owner role)")
  )

export const org = Command.make("org").pipe(
  Command.withDescription("Manage organizations and their members"),
  Command.withSubcommands([orgList, orgCreate, orgShow, orgMembers, orgAdd, orgRemove, orgRole])
)

const groupArgument = Argument.String("group").pipe(Argument.withDescription("The group's slug (@org/group in .oak/PERMISSIONS)"))

export const group = Command.make("group").pipe(
  Command.withDescription("Manage an organization's groups (members read them; owners and admins change them)"),
  Command.withSubcommands([
    Command.make("list", { org: orgFlag }, (input) => action((remote) => Effect.flatMap(groupModule(), (m) => m.list(remote, input)))).pipe(
      Command.withDescription("List the groups and their members")
    ),
    Command.make("create", {
      group: groupArgument,
      org: orgFlag,
      description: Flag.String("description").pipe(Flag.withMetavar("TEXT"), Flag.withDescription("A description"), Flag.optional)
    }, (input) => action((remote) => Effect.flatMap(groupModule(), (m) => m.create(remote, input)))).pipe(
      Command.withDescription("Create a group")
    ),
    Command.make("delete", { group: groupArgument, org: orgFlag }, (input) =>
      action((remote) => Effect.flatMap(groupModule(), (m) => m.remove(remote, input)))).pipe(Command.withDescription("Delete a group")),
    Command.make("add", { group: groupArgument, user: userArgument, org: orgFlag }, (input) =>
      action((remote) => Effect.flatMap(groupModule(), (m) => m.addMember(remote, { ...input, username: input.user })))).pipe(
        Command.withDescription("Add a member of the organization to a group")
      ),
    Command.make("remove", { group: groupArgument, user: userArgument, org: orgFlag }, (input) =>
      action((remote) => Effect.flatMap(groupModule(), (m) => m.removeMember(remote, { ...input, username: input.user })))).pipe(
        Command.withDescription("Take a user out of a group")
      )
  ])
)

export const key = Command.make("key").pipe(
  Command.withDescription("Manage your personal API keys"),
  Command.withSubcommands([
    Command.make("create", {
      name: Argument.String("name").pipe(Argument.withDescription("The key's name")),
      scope: Flag.Literals("scope", ["full", "read"]).pipe(Flag.withDefault("full" as const), Flag.withDescription("full: what you can do; read: read requests only (default full)")),
      repo: Flag.String("repo").pipe(Flag.withMetavar("OWNER/NAME"), Flag.withDescription("Limit the key to this repository"), Flag.optional),
      expiresAt: Flag.String("expires-at").pipe(Flag.withMetavar("TIME"), Flag.withDescription("When it stops working (ISO 8601 with a zone; default never)"), Flag.optional)
    }, (input) => action((remote) => Effect.flatMap(keyModule(), (m) => m.create(remote, input)))).pipe(
      Command.withDescription("Create a personal API key (printed once)")
    ),
    Command.make("list", {}, () => action((remote) => Effect.flatMap(keyModule(), (m) => m.list(remote)))).pipe(
      Command.withDescription("List your personal keys (prefixes, scope, last use)")
    ),
    Command.make("revoke", { id: Argument.String("key-id").pipe(Argument.withDescription("The key's id")) }, (input) =>
      action((remote) => Effect.flatMap(keyModule(), (m) => m.revoke(remote, input)))).pipe(Command.withDescription("Revoke a personal key at once"))
  ])
)

const saCreate = Command.make("create", {
  account: accountArgument,
  org: orgFlag,
  displayName: Flag.String("display-name").pipe(Flag.withMetavar("TEXT"), Flag.withDescription("A display name"), Flag.optional)
}, (input) =>
  action((remote) => Effect.flatMap(saModule(), (m) => m.create(remote, { org: input.org, name: input.account, displayName: input.displayName }))))
  .pipe(Command.withDescription("Create a service account (owners and admins)"))

const saList = Command.make("list", { org: orgFlag }, (input) =>
  action((remote) => Effect.flatMap(saModule(), (m) => m.list(remote, { org: input.org })))).pipe(
    Command.withDescription("List an organization's service accounts")
  )

const saState = (name: "disable" | "enable") =>
  Command.make(name, { account: accountArgument, org: orgFlag }, (input) =>
    action((remote) => Effect.flatMap(saModule(), (m) => m.setDisabled(remote, { org: input.org, name: input.account }, name === "disable")))).pipe(
      Command.withDescription(name === "disable" ? "Disable an account: all its keys stop at once" : "Enable an account again")
    )

const saDelete = Command.make("delete", { account: accountArgument, org: orgFlag }, (input) =>
  action((remote) => Effect.flatMap(saModule(), (m) => m.remove(remote, { org: input.org, name: input.account })))).pipe(
    Command.withDescription("Delete a service account and its keys")
  )

const keyCreate = Command.make("create", {
  account: accountArgument,
  name: Argument.String("name").pipe(Argument.withDescription("The key's name")),
  org: orgFlag,
  scopes: Flag.String("scopes").pipe(Flag.withAlias("scope"), Flag.withMetavar("LIST"), Flag.withDescription("Comma-separated: read, write, merge, admin, release"))
}, (input) =>
  action((remote) =>
    Effect.flatMap(saModule(), (m) => m.createKey(remote, { org: input.org, name: input.account, keyName: input.name, scopes: input.scopes }))))
  .pipe(Command.withDescription("Create a key for a service account (printed once)"))

const keyList = Command.make("list", { account: accountArgument, org: orgFlag }, (input) =>
  action((remote) => Effect.flatMap(saModule(), (m) => m.listKeys(remote, { org: input.org, name: input.account })))).pipe(
    Command.withDescription("List a service account's keys (prefixes, scopes, last use)")
  )

const keyRevoke = Command.make("revoke", {
  account: accountArgument,
  key: Argument.String("key-id").pipe(Argument.withDescription("The key's id")),
  org: orgFlag
}, (input) => action((remote) => Effect.flatMap(saModule(), (m) => m.revokeKey(remote, { org: input.org, name: input.account, keyId: input.key }))))
  .pipe(Command.withDescription("Revoke a service account's key"))

export const sa = Command.make("sa").pipe(
  Command.withDescription("Manage service accounts and their keys"),
  Command.withSubcommands([
    saCreate,
    saList,
    saState("disable"),
    saState("enable"),
    saDelete,
    Command.make("key").pipe(Command.withDescription("Manage a service account's keys"), Command.withSubcommands([keyCreate, keyList, keyRevoke]))
  ])
)

const permsShow = Command.make("show", {
  repo: Argument.String("repo").pipe(Argument.withDescription("The repository, as owner/name"))
}, (input) => action((remote) => Effect.flatMap(permsModule(), (m) => m.show(remote, { repo: input.repo })))).pipe(
  Command.withDescription("Show the server's parse of .oak/PERMISSIONS on main: rules, warnings, enforcement")
)

const permsPropose = Command.make("propose", {
  repo: Argument.String("repo").pipe(Argument.withDescription("The repository, as owner/name")),
  file: Argument.String("file").pipe(Argument.withDescription("The new .oak/PERMISSIONS"), Argument.optional),
  remove: Switch("delete").pipe(Flag.withDescription("Propose removing the file instead")),
  description: Flag.String("description").pipe(Flag.withMetavar("TEXT"), Flag.withDescription("The branch's description"), Flag.optional)
}, (input) => action((remote) => Effect.flatMap(permsModule(), (m) => m.propose(remote, input)))).pipe(
  Command.withDescription("Propose a new .oak/PERMISSIONS (or its removal) as a branch off main (admins and owners)")
)

export const perms = Command.make("perms").pipe(
  Command.withDescription("Path permissions (.oak/PERMISSIONS)"),
  Command.withSubcommands([permsShow, permsPropose])
)
