/**
 * Wire types of the chat history server (`shared/spec/protocol.md`), one file per family as on
 * the server (`server/chat_history/wire/methods/`); this index is what the package exports.
 *
 * Field names are the wire's (camelCase). Conventions, in every file here:
 * - In what a client *sends* (params, `Message`), optional fields are `?:`.
 * - In what the server *returns*, every field the protocol names is present; fields the protocol
 *   says may be null are typed `T | null`, never optional.
 */

export * from "./common";
export * from "./methods";
export * from "./settings";
export * from "./notifications";
export * from "./providers";
export * from "./usage";
export * from "./history";
export * from "./conversations";
export * from "./edits";
export * from "./search";
export * from "./workspaces";
export * from "./replies";
export * from "./imports";
export * from "./provider_state";
export * from "./branches";
