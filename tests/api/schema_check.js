// A small JSON Schema checker for the keywords the API tests use (type, properties, required,
// additionalProperties, enum, const, items, minItems, maxItems, minimum, maximum, minLength,
// maxLength, pattern, anyOf). Returns a list of problems, empty when `value` is valid.
export function schemaProblems(schema, value, path = '$') {
  const problems = [];
  const typeOf = (v) => (v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v);
  if (schema.anyOf) {
    if (!schema.anyOf.some((s) => schemaProblems(s, value, path).length === 0)) problems.push(`${path}: no anyOf branch`);
    return problems;
  }
  if (schema.type) {
    const types = [].concat(schema.type);
    const t = typeOf(value);
    if (!types.includes(t) && !(t === 'integer' && types.includes('number'))) {
      return [`${path}: expected ${types.join('|')}, got ${JSON.stringify(value)}`];
    }
  }
  if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) problems.push(`${path}: not in enum`);
  if ('const' in schema && JSON.stringify(schema.const) !== JSON.stringify(value)) problems.push(`${path}: not the const`);
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) problems.push(`${path}: below minimum`);
    if (schema.maximum !== undefined && value > schema.maximum) problems.push(`${path}: above maximum`);
  }
  if (typeof value === 'string') {
    const n = [...value].length;
    if (schema.minLength !== undefined && n < schema.minLength) problems.push(`${path}: shorter than minLength`);
    if (schema.maxLength !== undefined && n > schema.maxLength) problems.push(`${path}: longer than maxLength`);
    if (schema.pattern && !new RegExp(schema.pattern, 'u').test(value)) problems.push(`${path}: does not match pattern`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) problems.push(`${path}: too few items`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) problems.push(`${path}: too many items`);
    if (schema.items) value.forEach((v, i) => problems.push(...schemaProblems(schema.items, v, `${path}[${i}]`)));
  }
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    for (const name of schema.required ?? []) if (!(name in value)) problems.push(`${path}: ${name} missing`);
    for (const [k, v] of Object.entries(value)) {
      if (schema.properties && k in schema.properties) problems.push(...schemaProblems(schema.properties[k], v, `${path}.${k}`));
      else if (schema.additionalProperties === false) problems.push(`${path}: unexpected ${k}`);
    }
  }
  return problems;
}

export function assertValid(assert, schema, value) {
  const problems = schemaProblems(schema, value);
  assert.deepEqual(problems, [], `${JSON.stringify(value)}: ${problems.join('; ')}`);
}
