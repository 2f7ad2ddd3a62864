#!/usr/bin/env ruby
# Mints a tokengate api token with ruby-jwt (Debian 12: apt-get install ruby-jwt).
#
# Usage: mint.rb SECRET_FILE USER_ID [KID]
# SECRET_FILE holds the HMAC secret as tokengate's hmac_file reads it (raw bytes, a trailing newline ignored).
require "jwt"

secret_file, user_id, kid = ARGV
secret = File.binread(secret_file).chomp("\n")

claims = { "sub" => user_id, "iat" => Time.now.to_i, "api_only" => true }
header = kid ? { kid: kid } : {}
puts JWT.encode(claims, secret, "HS256", header)
