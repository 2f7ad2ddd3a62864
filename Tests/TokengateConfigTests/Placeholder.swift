import Testing

@Suite struct TokengateConfigTestsPlaceholder {
    @Test func placeholder() { #expect(1 + 1 == 2) }
}
