<?php
// Mints a tokengate api token with PHP's own hash_hmac (no package needed; Debian 12: apt-get install php-cli).
//
// Usage: php mint.php SECRET_FILE USER_ID [KID]
// SECRET_FILE holds the HMAC secret as tokengate's hmac_file reads it (raw bytes, a trailing newline ignored).

function base64url(string $bytes): string
{
    return rtrim(strtr(base64_encode($bytes), '+/', '-_'), '=');
}

[$script, $secretFile, $userId] = $argv;
$kid = $argv[3] ?? null;
$secret = file_get_contents($secretFile);
if (str_ends_with($secret, "\n")) {
    $secret = substr($secret, 0, -1);
}

$header = ['alg' => 'HS256', 'typ' => 'JWT'];
if ($kid !== null) {
    $header['kid'] = $kid;
}
// JSON_UNESCAPED_SLASHES: "/" need not be escaped; JSON_THROW_ON_ERROR: a user id that is not UTF-8 fails here.
$flags = JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_THROW_ON_ERROR;
$claims = ['sub' => $userId, 'iat' => time(), 'api_only' => true];
$signingInput = base64url(json_encode($header, $flags)) . '.' . base64url(json_encode($claims, $flags));
echo $signingInput . '.' . base64url(hash_hmac('sha256', $signingInput, $secret, true)) . "\n";
