package audit

// LineSize is lineSize, for the tests outside the package.
var LineSize = lineSize
