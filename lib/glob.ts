// glob: the name patterns the scripts take for candidates (sweep --candidates,
// family-ab --family): * any run, ? one character, everything else literal.

/** A glob as a whole-name regular expression. */
export function globRegExp(glob: string): RegExp {
  return new RegExp(`^${glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`);
}
